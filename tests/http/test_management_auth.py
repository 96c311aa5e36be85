"""Who may load and unload: loopback always; anyone else only with the configured bearer token."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes


class UnloadingHost:
    """Just enough of ModelHost for the management routes: counts the unloads it is asked for."""

    closing = False

    def __init__(self) -> None:
        self.unloaded: list[str] = []
        self.residency = self  # the routes unload through the host's residency

    async def unload(self, name: str) -> int:
        self.unloaded.append(name)
        return 0


def delete(client_ip: str, token: str = "", **headers: str) -> tuple[httpx.Response, list[str]]:
    host = UnloadingHost()
    routes = SageMakerRoutes(host, HttpSettings(1024, "", management_token=lambda: token))  # type: ignore[arg-type]
    transport = httpx.ASGITransport(build_app(routes), client=(client_ip, 40000))

    async def call() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.delete("/models/tenants/t1.joblib", headers=headers)

    return asyncio.run(call()), host.unloaded


@pytest.mark.parametrize("address", ["127.0.0.1", "127.8.9.10", "::1"])
def test_loopback_callers_may_manage_without_a_token(address: str) -> None:
    response, unloaded = delete(address)
    assert response.status_code == 200 and unloaded == ["tenants/t1.joblib"]


def test_remote_callers_are_refused_when_no_token_is_configured() -> None:
    response, unloaded = delete("10.1.2.3")
    assert response.status_code == 403 and unloaded == []
    assert "management_token" in response.json()["message"]


@pytest.mark.parametrize(
    "headers", [{}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}]
)
def test_remote_callers_need_the_right_token(headers: dict[str, Any]) -> None:
    response, unloaded = delete("10.1.2.3", token="s3cret", **headers)
    assert response.status_code == 401 and unloaded == []


def test_remote_callers_with_the_token_may_manage() -> None:
    response, unloaded = delete("10.1.2.3", token="s3cret", Authorization="Bearer s3cret")
    assert response.status_code == 200 and unloaded == ["tenants/t1.joblib"]
