"""Every route reads its body within max_request_size: 413, with the limit in the message, for a
body over it, whether its Content-Length says so or it arrives in chunks."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import pytest

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes

LIMIT = 1024
BIG = b'{"model_name": "m", "url": "' + b"x" * 4096 + b'"}'


class UnreachableHost:
    closing = False

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"host.{name} reached with a body over the limit")


async def chunks() -> AsyncIterator[bytes]:
    for start in range(0, len(BIG), 256):
        yield BIG[start : start + 256]


def call(path: str, chunked: bool) -> httpx.Response:
    app = build_app(SageMakerRoutes(cast(Any, UnreachableHost()), HttpSettings(LIMIT, "")))

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.post(path, content=chunks() if chunked else BIG)

    return asyncio.run(send())


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize(
    "path", ["/models", "/v2/repository/index", "/v2/repository/models/m/load"]
)
def test_json_routes_refuse_a_body_over_the_limit(path: str, chunked: bool) -> None:
    response = call(path, chunked)
    assert response.status_code == 413
    body = response.json()
    message = body.get("message") or body["error"]
    assert "max_request_size is 1.0 KiB" in message and "--max-request-size" in message
