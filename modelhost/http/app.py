"""The ASGI application: routes bound to a ModelHost, errors translated in one place, and, when an
observer is given, the observability routes and the middleware that measures every request."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Route
from starlette.types import ASGIApp

from modelhost.errors import ModelhostError
from modelhost.http.errors import handle_modelhost_error
from modelhost.http.invocations import ROUTES as INVOCATION_ROUTES
from modelhost.http.invocations import Invocations, in_front_of
from modelhost.http.middleware import ObserveMiddleware
from modelhost.http.observe import ObserveRoutes
from modelhost.http.routes import Routes
from modelhost.observe.observer import Observer


def build_app(routes: Routes, observer: Observer | None = None) -> ASGIApp:
    settings = routes.settings
    invocations = Invocations(
        routes.host, settings.max_request_bytes, settings.single_model, observer
    )
    served = [
        Route("/ping", routes.ping, methods=["GET"]),
        Route("/stats", routes.stats, methods=["GET"]),
        Route("/models", routes.list_models, methods=["GET"]),
        Route("/models", routes.load_model, methods=["POST"]),
        Route("/models/{model:path}", routes.describe_model, methods=["GET"]),
        Route("/models/{model:path}", routes.unload_model, methods=["DELETE"]),
        *(Route(path, invocations, methods=["POST"]) for path in INVOCATION_ROUTES),
    ]
    app = Starlette(
        routes=served + (ObserveRoutes(observer).routes() if observer else []),
        middleware=[Middleware(ObserveMiddleware, observer=observer)] if observer else [],
        exception_handlers={ModelhostError: handle_modelhost_error},
    )
    return in_front_of(app, invocations)
