"""The Open Inference Protocol (KServe v2) over REST, with Triton's extensions.

Inference bodies travel to the worker undecoded (see `modelhost.workers.oip`).
Triton's `m/config` and `m/stats` reach the metadata route as a model name.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from importlib import metadata
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from modelhost.documents import json_object
from modelhost.errors import BadRequestBody, ModelhostError, ModelNotFound, NotServed
from modelhost.host import Invocation, Result, State
from modelhost.http.errors import told_load
from modelhost.http.middleware import ERROR_KEY, MODEL_BYTES_KEY
from modelhost.http.oip_replies import (
    HEADER_LENGTH_HEADER,
    INFER,
    MODEL_PATH,
    VERSION_INFER,
    check_encoding,
    oip_error,
    oip_reply,
)
from modelhost.http.oip_replies import header_length as header_length_of_text
from modelhost.http.routes import SageMakerRoutes, model_in_path
from modelhost.protocols.not_served import not_served
from modelhost.protocols.oip import OipModels, check_load_parameters, missing
from modelhost.protocols.params import check_param
from modelhost.protocols.status import type_name_of
from modelhost.workers.answers import check_response_size
from modelhost.workers.oip_media import (
    MODEL_NAME_PARAM,
    MODEL_VERSION_PARAM,
    OIP_MEDIA_TYPE,
    oip_media_type,
)

EXTENSIONS = [
    *("binary_tensor_data", "classification", "model_configuration", "model_repository"),
    "statistics",
]
EXTENSION_CALLS = ("config", "stats")  # Triton's, on a model's path
ALL_MODELS_STATS = "stats"  # `GET /v2/models/stats`

Endpoint = Callable[[Request], Awaitable[Response]]


def oip_errors(endpoint: Endpoint) -> Endpoint:
    """Answer core exceptions with the protocol's `{"error": message}`."""

    @functools.wraps(endpoint)
    async def answered(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ModelhostError as error:
            request.scope[ERROR_KEY] = type_name_of(error)
            return told_load(oip_error(error), request.scope, error)

    return answered


class OipRoutes:
    def __init__(self, routes: SageMakerRoutes) -> None:
        self.http = routes
        self.host = routes.host
        self.models = OipModels(routes.host)

    def routes(self) -> list[Route]:
        """`{model}` may hold `/`, so the more specific paths come first."""
        model = MODEL_PATH
        table: list[tuple[str, Endpoint, str]] = [
            ("/v2", self.server_metadata, "GET"),
            ("/v2/health/live", self.live, "GET"),
            ("/v2/health/ready", self.ready, "GET"),
            ("/v2/repository/index", self.index, "POST"),
            ("/v2/repository/models/{model:path}/load", self.load, "POST"),
            ("/v2/repository/models/{model:path}/unload", self.unload, "POST"),
            (VERSION_INFER, self.infer, "POST"),
            (model + "/versions/{version}/ready", self.model_ready, "GET"),
            (model + "/versions/{version}", self.model_metadata, "GET"),
            (INFER, self.infer, "POST"),
            (model + "/ready", self.model_ready, "GET"),
            (model, self.model_metadata, "GET"),
        ]
        return [Route(path, oip_errors(endpoint), methods=[verb]) for path, endpoint, verb in table]

    # health and metadata ----------------------------------------------------------------

    async def server_metadata(self, request: Request) -> Response:
        return JSONResponse(
            {
                "name": "modelhost",
                "version": metadata.version("modelhost"),
                "extensions": EXTENSIONS,
            }
        )

    async def live(self, request: Request) -> Response:
        return JSONResponse({"live": True})

    async def ready(self, request: Request) -> Response:
        ready = self.http.health.ready
        return JSONResponse({"ready": ready}, 200 if ready else 400)  # the protocol's 4xx

    async def model_metadata(self, request: Request) -> Response:
        """The model's metadata, or a Triton extension's answer (`{model}/stats`, `/config`,
        every model's `stats`); what the caller may not read is never looked up."""
        name, version, held = self._model_of(request)
        reads = self.http.reads
        if reads.may_read(request, name) and await self._exists(held):
            return JSONResponse(self.models.metadata(name, held))
        call = extension_call(name) if not version else None
        if call is not None and reads.may_read(request, call[0]) and await self._exists(call[0]):
            return self._extension(*call)
        if name == ALL_MODELS_STATS and not version:
            reads.across(request)
            every = self.models.every_statistics(self.http.usage.for_model)
            return JSONResponse({"model_stats": every})
        reads.model(request, name)
        why = not_served(request.url.path)
        if why is not None:
            raise NotServed(why)
        raise ModelNotFound(missing(call[0] if call else name))

    async def model_ready(self, request: Request) -> Response:
        name, _, held = self._model_of(request)
        self.http.reads.model(request, name)
        ready = self._state(held) is State.LOADED
        if not ready and not await self._exists(held):
            raise ModelNotFound(missing(name))
        return JSONResponse({"name": name, "ready": ready}, 200 if ready else 400)

    def _model_of(self, request: Request) -> tuple[str, str, str]:
        """The path's model and version, and the name the host holds it under."""
        name = model_in_path(request)
        version = request.path_params.get("version", "")
        return name, version, self._held(name, version)

    def _held(self, name: str, version: str) -> str:
        return self.models.held(name, version)

    # Triton's extensions ----------------------------------------------------------------

    def _extension(self, name: str, version: str, call: str) -> Response:
        held = self._held(name, version)
        if call == "stats":
            stats = self.models.statistics(held, self.http.usage.for_model)
            return JSONResponse({"model_stats": [stats]})
        return JSONResponse(self.models.config(name, held))

    async def _exists(self, name: str) -> bool:
        return await self.models.exists(name)

    # inference --------------------------------------------------------------------------

    async def infer(self, request: Request) -> Response:
        name, version = model_in_path(request), request.path_params.get("version", "")
        check_encoding(request.headers.get("content-encoding"))
        body = await self.http.read_body(request)
        held = self._held(name, version)
        invocation = Invocation(
            body=body,
            content_type=oip_media_type(header_length(request, len(body))),
            accept=OIP_MEDIA_TYPE,
            params={MODEL_NAME_PARAM: name, MODEL_VERSION_PARAM: version},
            tenant=self.http.tenant_of(request, name),
        )
        result = await self.host.invoke(held, invocation)
        check_response_size(len(result.body), self.http.settings.max_response_bytes)
        request.scope[MODEL_BYTES_KEY] = result.model_bytes
        return oip_response(result)

    # model repository -------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        """Every model of the store and the host, streamed; `{"ready": true}`: the ready ones.

        The first page is read before the answer starts, so a store that fails says so.
        """
        self.http.reads.across(request)
        ready = (await self.optional_json(request)).get("ready", False)
        if not isinstance(ready, bool):
            raise BadRequestBody("Invalid value for 'ready': expected a boolean")
        pages = self.models.index(ready)
        first: list[dict[str, str]] = await anext(pages, [])
        return StreamingResponse(index_parts(first, pages), media_type="application/json")

    async def load(self, request: Request) -> Response:
        self.http.authorize(request)
        name = model_in_path(request)
        parameters = (await self.optional_json(request)).get("parameters") or {}
        if not isinstance(parameters, dict):
            raise BadRequestBody('\'parameters\' must be an object, such as {"url": "..."}')
        check_load_parameters(parameters)
        url = parameters.get("url")
        if url is not None and not isinstance(url, str):
            raise BadRequestBody("parameters.url must be a string: the URL to load the model from")
        if url is not None:
            check_param("parameters.url", url)
        await self.models.load(name, url)
        return Response(status_code=200)

    async def unload(self, request: Request) -> Response:
        self.http.authorize(request)
        await self.models.unload(model_in_path(request))
        return Response(status_code=200)

    async def optional_json(self, request: Request) -> dict[str, Any]:
        body = await self.http.read_body(request)
        return json_object(body) if body.strip() else {}

    def _state(self, name: str) -> State | None:
        return self.host.state_of(name)


async def index_parts(
    first: list[dict[str, str]], rest: AsyncIterator[list[dict[str, str]]]
) -> AsyncIterator[bytes]:
    """The index as a JSON array, each page of names read once the last is sent."""
    separator = b"["
    async for page in prepend(first, rest):
        if page:
            yield separator + ",".join(json.dumps(e, separators=(",", ":")) for e in page).encode()
            separator = b","
    yield b"[]" if separator == b"[" else b"]"


async def prepend(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    yield first
    async for item in rest:
        yield item


def extension_call(name: str) -> tuple[str, str, str] | None:
    """(model, version, call) of a Triton extension path such as `m/versions/1/config`."""
    head, _, call = name.rpartition("/")
    if call not in EXTENSION_CALLS or not head:
        return None
    model, marker, version = head.rpartition("/versions/")
    if marker and model and version and "/" not in version:
        return model, version, call
    return head, "", call


def header_length(request: Request, body_bytes: int) -> int | None:
    return header_length_of_text(request.headers.get(HEADER_LENGTH_HEADER), body_bytes)


def oip_response(result: Result) -> Response:
    return oip_reply(result.body, result.content_type, result.cache, result.tier, result.timings_ms)
