"""A `.mar` whose handler answers TorchServe's describe request with customized metadata."""

from __future__ import annotations

from pathlib import Path

from modelhost import testing

CUSTOMIZED = {"data1": "1", "data2": "2"}
# TorchServe's docs: a handler not inherited from BaseHandler checks the describe header itself
_HANDLER = f"""import json


def handle(data, context):
    if data is None:
        return None
    if context.get_request_header(0, "describe") == "True":
        return [json.dumps({CUSTOMIZED!r})]
    return [{{"rows": len(data)}}]
"""


def described_mar(source: Path, archive_path: Path) -> Path:
    """The archive at `archive_path`, built from the handler written into folder `source`."""
    source.mkdir(parents=True, exist_ok=True)
    (source / "handler.py").write_text(_HANDLER)
    return testing.mar_of(source, archive_path)
