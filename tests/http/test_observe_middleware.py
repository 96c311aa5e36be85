"""The middleware sees each request as the client did: route template, status, bytes, and for an
invocation the model, cache tier and latency parts from the response headers."""

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

INVOKE = "/models/{model:path}/invoke"


class RecordingObserver:
    def __init__(self) -> None:
        self.metrics = Metrics(CollectorRegistry())
        self.exchanges: list[Exchange] = []
        self.in_flight_while_streaming: float | None = -1.0

    def record(self, exchange: Exchange) -> None:
        self.exchanges.append(exchange)

    def in_flight(self) -> float | None:
        return self.metrics.registry.get_sample_value("modelhost_http_requests_in_flight")


async def invoke(request: Request) -> Response:
    await request.body()
    headers = {"X-Modelhost-Cache": "disk", "Server-Timing": "queue;dur=0.5, load;dur=12.0"}
    return Response(b'{"predictions": [0]}', media_type="application/json", headers=headers)


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
        Route(INVOKE, invoke, methods=["POST"]),
        Route("/invocations", invoke, methods=["POST"]),
        Route("/refuse/{model:path}", refuse),
        Route("/crash", crash),
        Route("/events", stream),
    ]
    middleware = Middleware(
        ObserveMiddleware, observer=observer, invocation_routes=frozenset({INVOKE, "/invocations"})
    )
    return Starlette(routes=routes, middleware=[middleware])


def exchanges(*requests: tuple[str, str, dict[str, str]]) -> RecordingObserver:
    observer = RecordingObserver()
    transport = httpx.ASGITransport(app(observer), raise_app_exceptions=False)

    async def send_all() -> None:
        async with httpx.AsyncClient(transport=transport, base_url="http://modelhost") as client:
            for method, path, headers in requests:
                await client.request(method, path, headers=headers, content=b"[1, 2, 3]")

    asyncio.run(send_all())
    return observer


def test_an_invocation_is_seen_with_its_model_tier_parts_and_bytes() -> None:
    [seen] = exchanges(("POST", "/models/tenants/t1.joblib/invoke", {})).exchanges
    assert (seen.method, seen.route, seen.status, seen.invocation) == ("POST", INVOKE, 200, True)
    assert (seen.model, seen.cache) == ("tenants/t1.joblib", "disk")
    assert seen.timings_ms == {"queue": 0.5, "load": 12.0}
    assert (seen.bytes_in, seen.bytes_out) == (9, 20)
    assert seen.error is None


def test_the_target_model_header_names_the_model_of_invocations() -> None:
    headers = {"X-Amzn-SageMaker-Target-Model": "a.joblib"}
    [seen] = exchanges(("POST", "/invocations", headers)).exchanges
    assert (seen.route, seen.model, seen.cache) == ("/invocations", "a.joblib", "disk")


def test_errors_are_seen_with_their_type_and_unmatched_paths_as_other() -> None:
    observer = exchanges(("GET", "/refuse/m", {}), ("GET", "/crash", {}), ("GET", "/nope", {}))
    refused, crashed, unmatched = observer.exchanges
    assert (refused.status, refused.error, refused.model) == (507, "InsufficientMemory", "m")
    assert (crashed.route, crashed.status) == ("/crash", 500)
    assert (unmatched.route, unmatched.status, unmatched.error) == ("other", 404, None)
    assert observer.in_flight() == 0


def test_an_event_stream_is_not_counted_as_a_request_in_flight() -> None:
    observer = exchanges(("GET", "/events", {}))
    assert observer.in_flight_while_streaming == 0
    assert observer.in_flight() == 0
