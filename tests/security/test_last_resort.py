"""An exception no route translated is answered 500 in the JSON error shape with a request id,
logged once with its traceback under that id, and counted; it never reaches the ASGI server."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import httpx
import pytest
from prometheus_client import CollectorRegistry

from modelhost.http.app import build_app
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.torchserve import build_management_app
from modelhost.observe.metrics import Metrics


class BuggyHost:
    """A host whose every method has a bug."""

    closing = False

    async def invoke(self, name: str, invocation: object) -> object:
        raise RuntimeError("a bug in invoke")

    def statistics(self) -> object:
        raise KeyError("a bug in statistics")

    def model_names(self) -> list[str]:
        raise ZeroDivisionError("a bug in model_names")


class Observer:
    """What build_app needs of an observer to count requests."""

    def __init__(self) -> None:
        self.metrics = Metrics(CollectorRegistry())

    def record(self, exchange: object) -> None:
        pass

    def unhandled(self) -> float | None:
        return self.metrics.registry.get_sample_value("modelhost_unhandled_errors_total")


def call(app: Any, method: str, path: str) -> httpx.Response:
    async def send() -> httpx.Response:
        transport = httpx.ASGITransport(app, raise_app_exceptions=True)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            target = {"X-Amzn-SageMaker-Target-Model": "m"}
            return await client.request(method, path, content=b"[1]", headers=target)

    return asyncio.run(send())


def routes() -> SageMakerRoutes:
    return SageMakerRoutes(cast(Any, BuggyHost()), HttpSettings(1024, ""))


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/models/m/invoke"),  # the bare ASGI endpoint in front of Starlette
        ("POST", "/invocations"),
        ("GET", "/stats"),  # a route Starlette answers
        ("GET", "/models"),
    ],
)
def test_bug_is_a_json_500(method: str, path: str, caplog: pytest.LogCaptureFixture) -> None:
    """A bug is a JSON 500 with a request id logged and counted."""
    observer = Observer()
    app = build_app(routes(), cast(Any, observer))
    with caplog.at_level(logging.ERROR, logger="modelhost.http"):
        response = call(app, method, path)
    assert response.status_code == 500
    body = response.json()
    assert set(body) == {"code", "type", "message"}
    assert body["code"] == 500 and body["type"] == "InternalError"
    request_id = response.headers["x-request-id"]
    assert request_id in body["message"] and "report" in body["message"]
    logged = [r for r in caplog.records if request_id in r.getMessage()]
    assert len(logged) == 1 and "\n" not in logged[0].getMessage()
    assert "Traceback" in logged[0].getMessage() and "a bug in" in logged[0].getMessage()
    assert observer.unhandled() == 1


def test_the_torchserve_management_port_has_the_same_last_resort() -> None:
    response = call(build_management_app(routes()), "GET", "/models")
    assert response.status_code == 500
    assert response.json()["type"] == "InternalError"
    assert response.headers["x-request-id"] in response.json()["message"]
