"""The invocation routes as a bare ASGI app, in front of the framework.

Starlette's stack costs more per request than the model (docs/performance.md), so the hot path
skips it. Its route table still lists these paths, so the OpenAPI document is whole.
"""

from __future__ import annotations

import functools
import time
import urllib.parse
from collections.abc import AsyncIterator, Container, Sequence

from starlette.responses import Response
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelhost.errors import BadRequestBody, ModelhostError
from modelhost.host import Invocation, ModelHost, Result
from modelhost.http.errors import error_response, told_load
from modelhost.http.forms import form_input, is_form
from modelhost.http.handler_heads import handler_head
from modelhost.http.invocation_paths import (
    CUSTOM_ATTRIBUTES_HEADER,
    CUSTOM_ATTRIBUTES_PARAM,
    EXPLANATIONS,
    INVOCATIONS,
    MODEL_INVOKE,
    PASSED_ON_HEADERS,
    PREDICTION_METHODS,
    PREDICTIONS,
    TARGET_MODEL_HEADER,
    accept_of,
    error_type,
    handed,
    is_torchserve,
    reply_headers,
    route_of,
)
from modelhost.http.last_resort import Unhandled
from modelhost.http.middleware import TENANT_HEADER
from modelhost.http.whole_response import send_whole
from modelhost.names import model_name
from modelhost.observe.exchange import Exchange
from modelhost.observe.observer import Observer
from modelhost.protocols.bodies import body_cut_short, check_body_size, read_within
from modelhost.protocols.params import check_headers, check_param, check_query
from modelhost.protocols.status import status_of
from modelhost.protocols.tenants import TenantRule
from modelhost.protocols.torchserve import MODEL_VERSION as TORCHSERVE_VERSION
from modelhost.workers.answers import check_response_size

ONE_VERSION = "/" + TORCHSERVE_VERSION
ROUTES = (INVOCATIONS, MODEL_INVOKE, PREDICTIONS, EXPLANATIONS)
MODEL_NAME_PARAM = "model_name"  # TorchServe's /invocations?model_name=m


def one_version(path: str, versioned: Container[str]) -> str:
    """The model TorchServe's `{model}/1.0` names."""
    model = path.removesuffix(ONE_VERSION)
    return path if not model or model in versioned else model


class Invocations:
    """The endpoint of every invocation route, never wrapped by the framework."""

    def __init__(
        self,
        host: ModelHost,
        max_request_bytes: int,
        single_model: str,
        observer: Observer | None = None,
        max_response_bytes: int = 0,
        *,
        unhandled: Unhandled | None = None,
        headers: Sequence[tuple[bytes, bytes]] = (),
        tenants: TenantRule | None = None,
        default_accept: str = "application/json",
    ) -> None:
        self.host = host
        self.default_accept = default_accept
        self.max_request_bytes = max_request_bytes
        self.max_response_bytes = max_response_bytes
        self.single_model = single_model
        self.observer = observer
        # here, not wrapped around `send` (decisions.md, "What one request costs")
        self.unhandled = unhandled or Unhandled()
        self.headers = list(headers)
        self.tenants = tenants  # None: tenants are off, and cost nothing

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.routed(scope, receive, send, route_of(scope["path"]))

    async def routed(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        route: tuple[str, str | None] | None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """The invocation on `route`; `headers`: the scope's as read (lowered, last kept)."""
        template, model = route or (INVOCATIONS, None)
        if is_torchserve(template) and model and model.endswith(ONE_VERSION):
            model = one_version(model, self.host.versioned)
        exchange = _Exchange(template, scope["method"])
        if self.observer is not None:
            self.observer.metrics.in_flight.inc()
        try:
            await self._answer(scope, receive, send, model, exchange, headers=headers)
        except Exception as error:  # a bug: the last resort's 500
            exchange.status, exchange.error = 500, "InternalError"
            if not exchange.answering:
                response = self.unhandled.answer(scope, error)
                await self._respond(response, exchange, scope, receive, send)
        finally:
            if self.observer is not None:
                self.observer.metrics.in_flight.dec()
                self.observer.record(exchange.done())

    async def _answer(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        model: str | None,
        exchange: _Exchange,
        headers: dict[str, str] | None,
    ) -> None:
        headers = _headers(scope) if headers is None else headers
        to_handler, request_id = handed(exchange.route, headers)
        try:
            check_headers(headers, PASSED_ON_HEADERS)
            name = model or headers.get(TARGET_MODEL_HEADER)
            exchange.model = name or None
            body = await self._body(receive, headers, exchange)
            accept = accept_of(exchange.route, headers, self.default_accept)
            invocation = _invocation(body, headers, _params(scope, headers), accept)
            invocation.headers, invocation.request_id = to_handler, request_id
            name = name or invocation.params.get(MODEL_NAME_PARAM) or self.single_model
            name = name or self.host.sole_startup_model()
            exchange.model = name or None
            if not name:
                raise BadRequestBody(
                    "no model named: send the X-Amzn-SageMaker-Target-Model header, or the "
                    "model_name parameter, with the model's path in the store, e.g. "
                    "tenants/t007.joblib"
                )
            model_name(name)
            if self.tenants is not None:
                # this request's own: set, not copied
                exchange.tenant = invocation.tenant = self.tenants.of(name, headers)
            result = await self.host.invoke(name, invocation)
            check_response_size(len(result.body), self.max_response_bytes)
            status, own = (200, None) if result.custom is None else handler_head(result.custom)
        except ModelhostError as error:
            exchange.status, exchange.error = status_of(error), type(error).__name__
            kind = error_type(exchange.route, error)
            response = error_response(
                exchange.status, kind, str(error), error.retry_after_s, request_id
            )
            exchange.result = error.loaded
            await self._respond(told_load(response, scope, error), exchange, scope, receive, send)
            return
        exchange.status, exchange.result = status, result
        exchange.bytes_out = len(result.body)
        exchange.answering = True
        answer_headers = reply_headers(
            result.content_type,
            len(result.body),
            result.cache,
            result.tier,
            result.timings_ms,
            request_id=request_id,
        )
        answer_headers += self.headers
        if exchange.tenant:
            answer_headers.append(_tenant_header(exchange.tenant))
        if own:
            answer_headers += own
        await send_whole(send, status, answer_headers, result.body)

    async def _respond(
        self, response: Response, exchange: _Exchange, scope: Scope, receive: Receive, send: Send
    ) -> None:
        response.raw_headers.extend([*self.headers, *_tenant_headers(exchange)])
        exchange.bytes_out = len(response.body)
        exchange.answering = True
        await response(scope, receive, send)

    async def _body(self, receive: Receive, headers: dict[str, str], exchange: _Exchange) -> bytes:
        declared = int(headers.get("content-length") or 0)
        limit = self.max_request_bytes
        check_body_size(declared, limit)
        message = await receive()  # most bodies come whole
        if message.get("more_body", False):
            return await read_within(_chunks(receive, message, exchange), declared, limit)
        body = _chunk(message)
        exchange.bytes_in = len(body)
        check_body_size(len(body), limit)
        return body


async def _chunks(receive: Receive, message: Message, exchange: _Exchange) -> AsyncIterator[bytes]:
    """The body's chunks from `message` on, counted for the observer."""
    while True:
        chunk = _chunk(message)
        exchange.bytes_in += len(chunk)
        yield chunk
        if not message.get("more_body", False):
            return
        message = await receive()


def _chunk(message: Message) -> bytes:
    """A chunk; a body cut short is not run."""
    if message["type"] == "http.disconnect":
        raise body_cut_short()
    body: bytes = message.get("body", b"")
    return body


class _Exchange:
    """What observers learn of one invocation."""

    def __init__(self, route: str, method: str) -> None:
        self.route, self.method = route, method
        self.arrived, self.started = time.time(), time.perf_counter()
        self.status = 500  # what an unexpected exception leaves
        self.answering = False  # once begun, a failure cannot send another response
        self.bytes_in = self.bytes_out = 0
        self.model: str | None = None
        self.tenant: str | None = None
        self.error: str | None = None
        self.result: Result | None = None

    def done(self) -> Exchange:
        result = self.result
        return Exchange(
            time=self.arrived,
            method=self.method,
            route=self.route,
            status=self.status,
            duration_s=time.perf_counter() - self.started,
            bytes_in=self.bytes_in,
            bytes_out=self.bytes_out,
            invocation=True,
            model=self.model,
            cache=result.cache if result else None,
            tier=result.tier if result else None,
            timings_ms=result.timings_ms if result else {},
            model_bytes=result.model_bytes if result else None,
            error=self.error,
            tenant=self.tenant,
        )


def _invocation(
    body: bytes, headers: dict[str, str], params: dict[str, str], accept: str
) -> Invocation:
    """The invocation of a request, from its body or form."""
    content_type = headers.get("content-type", "application/json")
    form = form_input(body, content_type) if is_form(content_type) else None
    if form is None:
        return Invocation(body, content_type, accept, params)
    for key, value in form.fields.items():
        check_param(key, value)
    return Invocation(form.body, form.content_type, accept, {**form.fields, **params})


def _headers(scope: Scope) -> dict[str, str]:
    return {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}


def _params(scope: Scope, headers: dict[str, str]) -> dict[str, str]:
    """Query parameters and SageMaker's custom attributes."""
    query = scope.get("query_string", b"").decode("latin-1")
    if not query and CUSTOM_ATTRIBUTES_HEADER not in headers:
        return {}
    check_query(query)
    params = dict(urllib.parse.parse_qsl(query)) if query else {}
    attributes = headers.get(CUSTOM_ATTRIBUTES_HEADER, "")
    for pair in attributes.replace(",", ";").split(";"):
        key, _, value = pair.partition("=")
        if key.strip() and value:
            params[key.strip()] = value.strip()
    if attributes:  # verbatim, for handlers' contexts
        params[CUSTOM_ATTRIBUTES_PARAM] = attributes
    for key, value in params.items():
        check_param(key, value)
    return params


def _tenant_headers(exchange: _Exchange) -> list[tuple[bytes, bytes]]:
    """The tenant counted, if any."""
    return [_tenant_header(exchange.tenant)] if exchange.tenant else []


@functools.lru_cache(maxsize=4096)  # built once a tenant, found in C on each answer after
def _tenant_header(tenant: str) -> tuple[bytes, bytes]:
    return TENANT_HEADER, tenant.encode("ascii")


class InvocationFastPath:
    """Invocations answered here; every other request goes on to `app`."""

    def __init__(self, app: ASGIApp, invocations: Invocations) -> None:
        self.app = app
        self.invocations = invocations

    @property
    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = getattr(self.app, "routes", [])
        return routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            route = invocation_route(scope["method"], scope["path"])
            if route is not None:  # found once, here, not again by the endpoint
                return await self.invocations.routed(scope, receive, send, route)
        await self.app(scope, receive, send)


def invocation_route(method: str, path: str) -> tuple[str, str | None] | None:
    """The route of a POST to an invocation route, or of another method TorchServe's takes."""
    if method == "POST" or (method in PREDICTION_METHODS and path.startswith("/predictions/")):
        return route_of(path)
    return None
