"""A body the client stops sending halfway, on the routes the framework serves (registering a
model, OIP's infer): a 400 that says the request was not run, as for
invocations, never an unhandled error logged with its traceback and counted as the server's."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, cast

import pytest

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes

HALF_A_BODY = [
    {"type": "http.request", "body": b'{"model_name": "m", "ur', "more_body": True},
    {"type": "http.disconnect"},
]


def post_half_a_body(app: Any, path: str) -> tuple[int, dict[str, Any]]:
    """POST to `path` a body whose client goes away halfway; the status and JSON body sent."""
    scope = {
        "type": "http",
        "method": "POST",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "client": ("127.0.0.1", 50000),
        "headers": [(b"content-type", b"application/json"), (b"content-length", b"100")],
    }
    messages, sent = list(HALF_A_BODY), []

    async def receive() -> Any:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return sent[0]["status"], json.loads(body)


def routes() -> SageMakerRoutes:
    return SageMakerRoutes(cast(Any, None), HttpSettings(1024, ""))


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/models", {"code", "type", "message"}), ("/v2/models/m/infer", {"error"})],
    ids=["register", "oip-infer"],
)
def test_a_body_cut_short_is_the_clients_400(
    path: str, shape: set[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="modelhost.http"):
        status, body = post_half_a_body(build_app(routes()), path)
    assert status == 400, body
    assert set(body) == shape
    assert "not run" in json.dumps(body)
    assert not caplog.records  # no traceback logged: the server did nothing wrong
