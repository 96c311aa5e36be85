"""Calling the ASGI apps in-process, with a host that no refused request may reach."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx

from modelhost.http.routes import HttpSettings, SageMakerRoutes


class UnreachableHost:
    """The core: a request the HTTP layer refuses must never reach it."""

    closing = False

    def __init__(self) -> None:
        self.registry = self  # the part TorchServe's routes ask whether a name is registered

    def is_registered(self, name: str) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"host.{name} reached by a request the HTTP layer should refuse")


def call(app: Any, method: str, path: str, **kwargs: Any) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path, **kwargs)

    return asyncio.run(send())


def routes() -> SageMakerRoutes:
    return SageMakerRoutes(cast(Any, UnreachableHost()), HttpSettings(1 << 20, ""))
