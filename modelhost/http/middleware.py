"""ASGI middleware that turns every request and its response into an `Exchange` for the observer.

The SageMaker and TorchServe invocations never pass here: `invocations` observes them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost.http.invocation_paths import CACHE_HEADER, TIER_HEADER, TIMING_HEADER
from modelhost.observe.exchange import Exchange, parse_server_timing
from modelhost.observe.observer import Observer
from modelhost.observe.tallies import LevelTally
from modelhost.protocols.answer_headers import TENANT

MAX_ERROR_BODY_BYTES = 64 * 1024
TENANT_KEY = "modelhost.tenant"  # in the scope, where a route found the request's tenant
TENANT_HEADER = TENANT.encode()
ERROR_KEY = "modelhost.error"  # OIP's error type
MODEL_BYTES_KEY = "modelhost.model_bytes"  # a load's footprint


class ObserveMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        observer: Observer,
        invocation_routes: frozenset[str] = frozenset(),
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.app = app
        self.observer = observer
        self.invocation_routes = invocation_routes
        self.clock = clock

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        watch = _Watch(time.time(), self.clock(), self.observer.metrics.in_flight)
        try:
            await self.app(scope, watch.receiving(receive), watch.sending(send, scope))
        except Exception:
            watch.status = watch.status if watch.started else 500
            raise
        finally:
            watch.answered()
            self.observer.record(self._exchange(scope, watch))

    def _exchange(self, scope: Scope, watch: _Watch) -> Exchange:
        route = getattr(scope.get("route"), "path", "other")
        return Exchange(
            time=watch.arrived,
            method=scope["method"],
            route=route,
            status=watch.status,
            duration_s=self.clock() - watch.started_at,
            bytes_in=watch.bytes_in,
            bytes_out=watch.bytes_out,
            invocation=route in self.invocation_routes,
            model=scope.get("path_params", {}).get("model"),
            cache=watch.headers.get(CACHE_HEADER, b"").decode() or None,
            tier=watch.headers.get(TIER_HEADER, b"").decode() or None,
            timings_ms=parse_server_timing(watch.headers.get(TIMING_HEADER, b"").decode()),
            error=scope.get(ERROR_KEY) or watch.error_type(),
            tenant=scope.get(TENANT_KEY),
            model_bytes=scope.get(MODEL_BYTES_KEY),
        )


def _tenant_header(scope: Scope) -> tuple[bytes, bytes]:
    return TENANT_HEADER, str(scope[TENANT_KEY]).encode("ascii")


class _Watch:
    """What one request brought and its response sent."""

    def __init__(self, arrived: float, started_at: float, in_flight: LevelTally) -> None:
        self.arrived, self.started_at = arrived, started_at
        self.in_flight = in_flight
        self.waiting = True  # in `in_flight` until answered or a stream starts
        in_flight.inc()
        self.status = 500
        self.started = False
        self.headers: dict[bytes, bytes] = {}
        self.bytes_in = self.bytes_out = 0
        self._error_body = bytearray()

    def receiving(self, receive: Receive) -> Receive:
        async def counted() -> Message:
            message = await receive()
            if message["type"] == "http.request":
                self.bytes_in += len(message.get("body", b""))
            return message

        return counted

    def sending(self, send: Send, scope: Scope) -> Send:
        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                self.started, self.status = True, message["status"]
                if TENANT_KEY in scope:
                    message["headers"] = [*message.get("headers", []), _tenant_header(scope)]
                self.headers = {name.lower(): value for name, value in message.get("headers", [])}
                if self.headers.get(b"content-type", b"").startswith(b"text/event-stream"):
                    self.answered()  # a stream is not waiting for its answer
            elif message["type"] == "http.response.body":
                self._body(message.get("body", b""))
            await send(message)

        return watched

    def answered(self) -> None:
        if self.waiting:
            self.waiting = False
            self.in_flight.dec()

    def _body(self, chunk: bytes) -> None:
        self.bytes_out += len(chunk)
        if self.status >= 400 and len(self._error_body) + len(chunk) <= MAX_ERROR_BODY_BYTES:
            self._error_body += chunk

    def error_type(self) -> str | None:
        if self.status < 400 or not self.headers.get(b"content-type", b"").startswith(
            b"application/json"
        ):
            return None
        try:
            body: Any = json.loads(self._error_body)
        except ValueError:
            return None
        error = body.get("type") if isinstance(body, dict) else None
        return error if isinstance(error, str) else None
