"""A URL to load a model from is capped like every parameter the core is given: 400 naming the
limit, before the host sees it."""

from __future__ import annotations

from typing import Any

import pytest
from asgi_calls import call, routes

from modelhost.http.app import build_app
from modelhost.http.torchserve import build_management_app

URL = "s3://bucket/" + "k" * 5000


@pytest.mark.parametrize(
    ("torchserve", "path", "kwargs"),
    [
        (False, "/models", {"json": {"model_name": "m", "url": URL}}),
        (False, "/v2/repository/models/m/load", {"json": {"parameters": {"url": URL}}}),
        (True, "/models", {"params": {"url": URL, "model_name": "m"}}),
    ],
    ids=["sagemaker", "oip", "torchserve"],
)
def test_an_oversized_url_is_400_naming_the_limit(
    torchserve: bool, path: str, kwargs: dict[str, Any]
) -> None:
    app = build_management_app(routes()) if torchserve else build_app(routes())
    response = call(app, "POST", path, **kwargs)
    assert response.status_code == 400
    body = response.json()
    message = body.get("message") or body["error"]
    assert "at most 4096" in message and "k" * 300 not in message
