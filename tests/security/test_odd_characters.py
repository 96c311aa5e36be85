"""Characters a check let through that the code after it refused: a non-ASCII Authorization
header, and digits such as '²' that `str.isdigit` takes and `int` does not. Each is a 4xx that
says what to send, not a 500."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import httpx
import pytest
from starlette.requests import Request

from modelhost.errors import BadRequestBody
from modelhost.http.app import build_app
from modelhost.http.observe import last_event_id
from modelhost.http.oip import header_length
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.torchserve import build_management_app


class Host:
    closing = False

    def __init__(self) -> None:
        self.registry = self.residency = self  # the parts the routes call, in one fake

    def model_names(self) -> list[str]:
        return ["a", "b"]

    def is_registered(self, name: str) -> bool:
        return False

    async def unload(self, name: str) -> int:
        raise AssertionError("unloaded without the token")


def call(app: Any, method: str, path: str, client_ip: str = "127.0.0.1", **kw: Any) -> Any:
    transport = httpx.ASGITransport(app, client=(client_ip, 40000))

    async def send() -> httpx.Response:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            return await client.request(method, path, **kw)

    return asyncio.run(send())


def routes(token: str = "") -> SageMakerRoutes:
    settings = HttpSettings(1024, "", management_token=lambda: token)
    return SageMakerRoutes(cast(Any, Host()), settings)


def test_non_ascii_authorization_is_401() -> None:
    """A non-ASCII authorization header is 401 saying what to send."""
    headers = {"Authorization": "Bearer s\xe9cret".encode("latin-1")}
    response = call(build_app(routes("secret")), "DELETE", "/models/m", "10.0.0.5", headers=headers)
    assert response.status_code == 401
    assert response.json()["type"] == "Unauthorized"
    assert "non-ASCII" in response.json()["message"] and "Bearer" in response.json()["message"]


@pytest.mark.parametrize("limit", ["²", "1²", "٣"])
def test_non_ascii_page_size_is_400(limit: str) -> None:
    """A non-ASCII digit in a page size is 400."""
    response = call(build_app(routes()), "GET", "/models", params={"limit": limit})
    assert response.status_code == 400
    assert "give a page size from 1 to" in response.json()["message"]


@pytest.mark.parametrize("query", ["limit=%C2%B2", "next_page_token=%C2%B2"])
def test_torchserve_numbers_take_ascii_digits_only(query: str) -> None:
    response = call(build_management_app(routes()), "GET", f"/models?{query}")
    assert response.status_code == 400 and response.json()["type"] == "BadRequestException"


def request_with(header: bytes, value: bytes) -> Request:
    scope = {"type": "http", "method": "GET", "path": "/", "query_string": b"", "headers": []}
    scope["headers"] = [(header, value)]
    return Request(scope)


def test_a_superscript_last_event_id_is_refused() -> None:
    with pytest.raises(BadRequestBody, match="give the id of an event received"):
        last_event_id(request_with(b"last-event-id", "²".encode("latin-1")))


def test_a_superscript_inference_header_length_is_refused() -> None:
    request = request_with(b"inference-header-content-length", "²".encode("latin-1"))
    with pytest.raises(BadRequestBody, match="must be the byte length"):
        header_length(request, 100)
