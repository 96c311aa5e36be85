"""The ASGI application: routes bound to a ModelHost, errors translated in one place."""

from __future__ import annotations

import functools
import time
from collections.abc import Sequence

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Scope

from modelhost.errors import ModelhostError
from modelhost.http.cross_site import CrossSiteGuard
from modelhost.http.errors import handle_http_exception, handle_modelhost_error
from modelhost.http.instance import InstanceHeader, instance_header, instance_name
from modelhost.http.invocation_paths import PREDICTION_METHODS, PREDICTIONS
from modelhost.http.invocations import ROUTES as INVOCATION_ROUTES
from modelhost.http.invocations import InvocationFastPath, Invocations
from modelhost.http.kserve_v1 import KserveV1Routes
from modelhost.http.last_resort import LastResort, Unhandled
from modelhost.http.middleware import ObserveMiddleware
from modelhost.http.observe import ObserveRoutes
from modelhost.http.oip import OipRoutes
from modelhost.http.openapi import OpenApiRoute
from modelhost.http.request_ids import RequestIdHeader
from modelhost.http.routes import SageMakerRoutes
from modelhost.http.token_guard import TOKEN_PATH, TokenGuard, inference_port_needs
from modelhost.observe.exchange import Exchange
from modelhost.observe.observer import Observer


def build_app(
    routes: SageMakerRoutes, observer: Observer | None = None, token_api: bool = False
) -> ASGIApp:
    """The main port's app; under TorchServe's token authorization, behind its guard."""
    app = main_app(routes, observer)
    keys = routes.settings.keys
    if not keys:
        return app
    needs = inference_port_needs(management_routes(app.routes))
    observe = functools.partial(observe_answer, observer) if observer else lambda *_: None
    return TokenGuard(app, keys, needs, token_api, observe)


def observe_answer(observer: Observer, scope: Scope, response: Response) -> None:
    """A refusal or a token API answer of the guard, counted and logged as any request."""
    status = response.status_code
    exchange = Exchange(
        time=time.time(),
        method=scope["method"],
        route=TOKEN_PATH if scope["path"] == TOKEN_PATH else "other",
        status=status,
        duration_s=0.0,
        bytes_in=0,
        bytes_out=len(response.body),
        error={400: "BadRequestBody", 401: "Unauthorized"}.get(status),
    )
    observer.record(exchange)


def main_app(routes: SageMakerRoutes, observer: Observer | None = None) -> InvocationFastPath:
    """SageMaker's, TorchServe's inference, OIP's, KServe v1's and modelhost's own routes."""
    settings = routes.settings
    unhandled = Unhandled(observer.metrics.unhandled_errors if observer else None)
    instance = instance_name(settings.instance_id)
    invocations = Invocations(
        routes.host,
        settings.max_request_bytes,
        settings.single_model,
        observer,
        settings.max_response_bytes,
        unhandled=unhandled,
        headers=[instance_header(instance)],
        tenants=settings.tenants,
        default_accept=settings.default_accept,
    )
    served = [
        Route("/ping", routes.ping, methods=["GET"]),
        Route("/stats", routes.stats, methods=["GET"]),
        Route("/execution-parameters", routes.execution_parameters, methods=["GET"]),
        Route("/models", routes.list_models, methods=["GET"]),
        Route("/models", routes.load_model, methods=["POST"]),
        Route("/models/{model:path}", routes.describe_model, methods=["GET"]),
        Route("/models/{model:path}", routes.unload_model, methods=["DELETE"]),
        *(Route(path, invocations, methods=["POST"]) for path in INVOCATION_ROUTES),
        Route(PREDICTIONS, invocations, methods=list(PREDICTION_METHODS)),
        *OipRoutes(routes).routes(),
        *KserveV1Routes(routes).routes(),
    ]
    served += ObserveRoutes(observer, routes.reads).routes() if observer else []
    app = Starlette(
        routes=[*served, OpenApiRoute(served, "main")],
        middleware=[
            *(observe_middleware(observer, served) if observer else []),
            Middleware(CrossSiteGuard, routes=management_routes(served)),
            Middleware(RequestIdHeader),
        ],
        exception_handlers={
            ModelhostError: handle_modelhost_error,
            HTTPException: handle_http_exception,
            Exception: unhandled.framework_handler,
        },
    )
    # invocations first, answered whole by their endpoint
    return InvocationFastPath(InstanceHeader(LastResort(app, unhandled), instance), invocations)


# the calls that change what is served (docs/security.md)
MANAGEMENT_CALLS = frozenset(
    {
        ("POST", "/models"),
        ("DELETE", "/models/{model:path}"),
        ("POST", "/v2/repository/models/{model:path}/load"),
        ("POST", "/v2/repository/models/{model:path}/unload"),
    }
)


def management_routes(served: Sequence[BaseRoute]) -> list[Route]:
    """The routes a page of another origin may not call (cross_site.py)."""
    return [
        route
        for route in served
        if isinstance(route, Route)
        and any((method, route.path) in MANAGEMENT_CALLS for method in route.methods or ())
    ]


def observe_middleware(observer: Observer, served: list[Route]) -> list[Middleware]:
    """The observing middleware; OIP's and KServe v1's invocations are observed from their
    responses."""
    infer_routes = frozenset(r.path for r in served if r.path.endswith(("/infer", ":predict")))
    return [Middleware(ObserveMiddleware, observer=observer, invocation_routes=infer_routes)]
