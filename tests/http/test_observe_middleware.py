"""The middleware sees each request as the client did: route template, status, bytes, and the
error's type."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
from prometheus_client import CollectorRegistry
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from modelhost.http.middleware import ObserveMiddleware
from modelhost.observe.exchange import Exchange
from modelhost.observe.metrics import Metrics


class RecordingObserver:
    def __init__(self) -> None:
        self.metrics = Metrics(CollectorRegistry())
        self.exchanges: list[Exchange] = []
        self.in_flight_while_streaming: float | None = -1.0

    def record(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)

    def in_flight(self) -> float | None:
        return self.metrics.registry.get_sample_value("modelhost_http_requests_in_flight")


async def refuse(request: Request) -> Response:
    return JSONResponse({"code": 507, "type": "InsufficientMemory", "message": "no room"}, 507)


async def crash(request: Request) -> Response:
    raise RuntimeError("a bug")


def app(observer: RecordingObserver) -> Starlette:
    async def stream(request: Request) -> Response:
        async def frames() -> AsyncIterator[str]:
            observer.in_flight_while_streaming = observer.in_flight()
            yield "data: {}\n\n"

        return StreamingResponse(frames(), media_type="text/event-stream")

    routes = [
        Route("/refuse/{model:path}", refuse),
        Route("/crash", crash),
        Route("/events", stream),
    ]
    middleware = Middleware(ObserveMiddleware, observer=observer)
    return Starlette(routes=routes, middleware=[middleware])


def exchanges(*requests: tuple[str, str, dict[str, str]]) -> RecordingObserver:
    observer = RecordingObserver()
    transport = httpx.ASGITransport(app(observer), raise_app_exceptions=False)

    async def send_all() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            for method, path, headers in requests:
                await client.request(method, path, headers=headers, content=b"[1, 2, 3]")

    asyncio.run(send_all())
    return observer


def test_errors_are_seen_by_type() -> None:
    """Errors are seen with their type and unmatched paths as "other"."""
    observer = exchanges(("GET", "/refuse/m", {}), ("GET", "/crash", {}), ("GET", "/nope", {}))
    refused, crashed, unmatched = observer.exchanges
    assert (refused.status, refused.error, refused.model) == (507, "InsufficientMemory", "m")
    assert (crashed.route, crashed.status) == ("/crash", 500)
    assert (unmatched.route, unmatched.status, unmatched.error) == ("other", 404, None)
    assert observer.in_flight() == 0


def test_event_stream_is_not_in_flight() -> None:
    """An event stream is not counted as a request in flight."""
    observer = exchanges(("GET", "/events", {}))
    assert observer.in_flight_while_streaming == 0
    assert observer.in_flight() == 0
