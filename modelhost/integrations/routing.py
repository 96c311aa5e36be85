"""The model a request is for, read as deploy/nginx/modelhost.conf's maps read it."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping

TARGET_MODEL_HEADER = "x-amzn-sagemaker-target-model"
_PATH_MODEL = [
    re.compile(r"^/models/(?P<m>.+)/invoke$"),
    re.compile(r"^/predictions/(?P<m>.+)$"),
    re.compile(r"^/v2/models/(?P<m>.+?)(?:/versions/[^/]+)?(?:/infer|/ready|/stats|/config)?$"),
    re.compile(r"^/models/(?P<m>.+)$"),
]


def target_model(path: str, headers: Mapping[str, str]) -> str:
    """`headers` with lower-case names."""
    decoded = urllib.parse.unquote(path)
    for pattern in _PATH_MODEL:
        found = pattern.match(decoded)
        if found:
            return found["m"]
    return headers.get(TARGET_MODEL_HEADER, "")
