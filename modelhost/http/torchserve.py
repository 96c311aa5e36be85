"""TorchServe's management API over REST, on its own port as TorchServe serves it.

The main port keeps SageMaker's calls, which share the paths but not the shapes.
"""

from __future__ import annotations

from collections.abc import Mapping

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from modelhost.errors import ModelhostError
from modelhost.http.cross_site import CrossSiteGuard, state_changing
from modelhost.http.errors import handle_http_exception, handle_torchserve_error
from modelhost.http.last_resort import LastResort, Unhandled
from modelhost.http.openapi import OpenApiRoute
from modelhost.http.request_ids import RequestIdHeader
from modelhost.http.routes import SageMakerRoutes
from modelhost.http.token_guard import TokenGuard, management_port_needs
from modelhost.protocols.registration import boolean, count, json_params
from modelhost.protocols.torchserve import (
    MODEL_VERSION,
    TorchServeModels,
    describe,
    start_after,
    unless_negative,
)

TORCHSERVE, MMS = "torchserve", "mms"
MANAGEMENT_APIS = (TORCHSERVE, MMS)
SET_DEFAULT = "/set-default"
__all__ = [
    "MODEL_VERSION",
    "TorchServeManagement",
    "build_management_app",
    "describe",
    "start_after",
    "unless_negative",
]


def build_management_app(
    routes: SageMakerRoutes, unhandled: Unhandled | None = None, api: str = TORCHSERVE
) -> ASGIApp:
    """The management port's app; under TorchServe's token authorization, behind its guard."""
    app = management_app(routes, unhandled, api)
    keys = routes.settings.keys
    return TokenGuard(app, keys, management_port_needs, token_api=True) if keys else app


def management_app(
    routes: SageMakerRoutes, unhandled: Unhandled | None = None, api: str = TORCHSERVE
) -> LastResort:
    """TorchServe's or MMS's management routes, guarded from other origins."""
    served = TorchServeManagement(routes, api).routes()
    unhandled = unhandled or Unhandled()
    app = Starlette(
        routes=[*served, OpenApiRoute(served, "torchserve")],
        middleware=[
            Middleware(CrossSiteGuard, routes=state_changing(served)),
            Middleware(RequestIdHeader),
        ],
        exception_handlers={
            ModelhostError: handle_torchserve_error,
            HTTPException: handle_http_exception,
            Exception: unhandled.framework_handler,
        },
    )
    return LastResort(app, unhandled)


class TorchServeManagement:
    """TorchServe's management calls; with `api="mms"`, MMS's shapes where they differ."""

    def __init__(self, routes: SageMakerRoutes, api: str = TORCHSERVE) -> None:
        if api not in MANAGEMENT_APIS:
            raise ValueError(f"api must be one of {MANAGEMENT_APIS}, not {api!r}")
        self.api = api
        self.http = routes
        self.host = routes.host
        self.models = TorchServeModels(routes.host, routes.settings.model_api)

    def routes(self) -> list[Route]:
        return [
            Route("/models", self.register, methods=["POST"]),
            Route("/models", self.list_models, methods=["GET"]),
            Route("/models/{model:path}", self.describe, methods=["GET"]),
            Route("/models/{model:path}", self.unregister, methods=["DELETE"]),
            Route("/models/{model:path}", self.scale, methods=["PUT"]),
        ]

    async def register(self, request: Request) -> Response:
        """`?url=…&model_name=…&initial_workers=N&synchronous=true|false&runtime=python`."""
        self.http.authorize(request)
        params: Mapping[str, str] = request.query_params
        if request.headers.get("content-type", "").startswith("application/json"):
            body = await self.http.read_body(request)  # within max_request_size
            params = {**params, **json_params(body)} if body else params  # TorchServe reads it
        return status(*await self.models.register(params))

    async def list_models(self, request: Request) -> Response:
        self.http.reads.across(request)
        query = request.query_params
        return JSONResponse(
            self.models.list_models(query.get("limit"), query.get("next_page_token"))
        )

    async def describe(self, request: Request) -> Response:
        """A list of descriptions, as TorchServe answers; MMS answers the first object."""
        self.http.reads.across(request)  # the operator's API: its port serves no tenant
        path = request.path_params["model"]
        if boolean(request.query_params.get("customized"), "customized", default=False):
            descriptions = await self.models.describe_customized(path)
        else:
            descriptions = self.models.describe(path)
        return JSONResponse(descriptions[0] if self.api == MMS else descriptions)

    def set_default(self, request: Request) -> Response:
        path = request.path_params["model"].removesuffix(SET_DEFAULT)
        return status(self.models.set_default(path))

    async def unregister(self, request: Request) -> Response:
        self.http.authorize(request)
        return status(await self.models.unregister(request.path_params["model"]))

    async def scale(self, request: Request) -> Response:
        """`?min_worker=N&max_worker=M`: the range of copies; set-default comes here too."""
        self.http.authorize(request)
        if request.path_params["model"].endswith(SET_DEFAULT):
            return self.set_default(request)
        query = request.query_params
        low = count(query["min_worker"], "min_worker") if query.get("min_worker") else None
        high = count(query["max_worker"], "max_worker") if query.get("max_worker") else low
        answer = await self.models.scale(
            request.path_params["model"],
            query.get("model_version"),
            low,
            high or 0,  # TorchServe's max_worker defaults to min_worker
            synchronous=query.get("synchronous", "false").lower() == "true",
        )
        return status(*answer)


def status(message: str, code: int = 200) -> JSONResponse:
    return JSONResponse({"status": message}, code)
