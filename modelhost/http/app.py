"""The ASGI application: routes bound to a ModelHost, errors translated in one place."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.routing import Route

from modelhost.errors import ModelhostError
from modelhost.http.errors import handle_modelhost_error
from modelhost.http.routes import Routes


def build_app(routes: Routes) -> Starlette:
    return Starlette(
        routes=[
            Route("/ping", routes.ping, methods=["GET"]),
            Route("/stats", routes.stats, methods=["GET"]),
            Route("/invocations", routes.invocations, methods=["POST"]),
            Route("/models", routes.list_models, methods=["GET"]),
            Route("/models", routes.load_model, methods=["POST"]),
            Route("/models/{model:path}/invoke", routes.invoke, methods=["POST"]),
            Route("/models/{model:path}", routes.describe_model, methods=["GET"]),
            Route("/models/{model:path}", routes.unload_model, methods=["DELETE"]),
            Route("/predictions/{model:path}", routes.invoke, methods=["POST"]),
        ],
        exception_handlers={ModelhostError: handle_modelhost_error},
    )
