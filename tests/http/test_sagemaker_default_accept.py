"""The Accept an invocation without one is answered in: HttpSettings' default_accept, as
SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT sets the toolkit's."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx

from modelhost.host import Invocation, Result
from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes


class EchoHost:
    """A host that answers each invocation with the Accept it was handed."""

    versioned: frozenset[str] = frozenset()

    def sole_startup_model(self) -> str:
        return ""

    async def invoke(self, name: str, invocation: Invocation) -> Result:
        return Result(invocation.accept.encode(), "text/plain", "hit", {})


def accept_seen(settings: HttpSettings, **headers: str) -> str:
    app = build_app(SageMakerRoutes(cast(Any, EchoHost()), settings))

    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://modelhost") as client:
            del client.headers["accept"]  # httpx's own */*
            return await client.post("/models/m/invoke", content=b"1", headers=headers)

    response = asyncio.run(send())
    assert response.status_code == 200, response.text
    return response.text


def test_missing_accept_is_the_default_accept() -> None:
    assert accept_seen(HttpSettings(1024, "", default_accept="text/csv")) == "text/csv"


def test_a_given_accept_is_kept() -> None:
    settings = HttpSettings(1024, "", default_accept="text/csv")
    assert accept_seen(settings, accept="application/json") == "application/json"


def test_the_default_accept_is_json_by_default() -> None:
    assert accept_seen(HttpSettings(1024, "")) == "application/json"
