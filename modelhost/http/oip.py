"""The Open Inference Protocol (KServe v2) over REST: health, server and model metadata, model
readiness, inference with typed tensors (binary tensor data included) and the model repository
extension, so Triton's and KServe's clients work unmodified.

Inference bodies travel to the worker undecoded, labelled with modelhost's OIP media type; the
worker answers in kind (see `modelhost.workers.oip`). Errors take the protocol's shape,
`{"error": "..."}`, with the status the one table gives each core exception.
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

from modelhost.cache.memory import State
from modelhost.errors import BadRequestBody, ModelhostError, ModelNotFound
from modelhost.host import Invocation, Result
from modelhost.host.listing import EVERYWHERE, LOADED
from modelhost.http.errors import RETRY_AFTER_S, status_of
from modelhost.http.invocations import check_response_size, invocation_response
from modelhost.http.params import check_param, is_whole_number
from modelhost.http.routes import SageMakerRoutes, json_object, model_in_path
from modelhost.names import echo
from modelhost.workers.oip_media import (
    MODEL_NAME_PARAM,
    MODEL_VERSION_PARAM,
    OIP_MEDIA_TYPE,
    header_length_of,
    is_oip,
    oip_media_type,
)

HEADER_LENGTH_HEADER = "inference-header-content-length"
MODEL_VERSION = "1"  # a model is one artifact: its only version
EXTENSIONS = ["binary_tensor_data", "model_repository"]
REPOSITORY_STATE = {State.LOADED: "READY", State.LOADING: "LOADING", State.UNLOADING: "UNLOADING"}
INDEX_PART_NAMES = 1000  # names read and sent at a time by the repository index

Endpoint = Callable[[Request], Awaitable[Response]]


def oip_errors(endpoint: Endpoint) -> Endpoint:
    """Answer core exceptions with the protocol's error body, `{"error": message}`."""

    @functools.wraps(endpoint)
    async def answered(request: Request) -> Response:
        try:
            return await endpoint(request)
        except ModelhostError as error:
            status = status_of(error)
            headers = {"Retry-After": RETRY_AFTER_S[status]} if status in RETRY_AFTER_S else None
            return JSONResponse({"error": str(error)}, status, headers)

    return answered


class OipRoutes:
    def __init__(self, routes: SageMakerRoutes) -> None:
        self.http = routes
        self.host = routes.host

    def routes(self) -> list[Route]:
        """`{model}` may hold `/` (sent as is or as %2F); the more specific paths match first."""
        model = "/v2/models/{model:path}"
        table: list[tuple[str, Endpoint, str]] = [
            ("/v2", self.server_metadata, "GET"),
            ("/v2/health/live", self.live, "GET"),
            ("/v2/health/ready", self.ready, "GET"),
            ("/v2/repository/index", self.index, "POST"),
            ("/v2/repository/models/{model:path}/load", self.load, "POST"),
            ("/v2/repository/models/{model:path}/unload", self.unload, "POST"),
            (model + "/versions/{version}/infer", self.infer, "POST"),
            (model + "/versions/{version}/ready", self.model_ready, "GET"),
            (model + "/versions/{version}", self.model_metadata, "GET"),
            (model + "/infer", self.infer, "POST"),
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
        ready = self.http.ready and not self.host.closing
        return JSONResponse({"ready": ready}, 200 if ready else 400)  # the protocol: 4xx if not

    async def model_metadata(self, request: Request) -> Response:
        """What every model takes and gives; a model's own metadata would need it loaded."""
        name, _ = model_of(request)
        return JSONResponse(
            {
                "name": name,
                "versions": [MODEL_VERSION],
                "platform": "modelhost",
                "inputs": [{"name": "input-0", "datatype": "FP64", "shape": [-1, -1]}],
                "outputs": [
                    {"name": "predict", "datatype": "FP64", "shape": [-1]},
                    {"name": "predict_proba", "datatype": "FP64", "shape": [-1, -1]},
                ],
            }
        )

    async def model_ready(self, request: Request) -> Response:
        name, _ = model_of(request)
        ready = self._state(name) is State.LOADED
        return JSONResponse({"name": name, "ready": ready}, 200 if ready else 400)

    # inference --------------------------------------------------------------------------

    async def infer(self, request: Request) -> Response:
        name, version = model_of(request)
        body = await self.http.read_body(request)
        invocation = Invocation(
            body=body,
            content_type=oip_media_type(header_length(request, len(body))),
            accept=OIP_MEDIA_TYPE,
            params={MODEL_NAME_PARAM: name, MODEL_VERSION_PARAM: version},
        )
        result = await self.host.invoke(name, invocation)
        check_response_size(len(result.body), self.http.settings.max_response_bytes)
        return oip_response(result)

    # model repository -------------------------------------------------------------------

    async def index(self, request: Request) -> Response:
        """Every model known, streamed a part at a time; `{"ready": true}`: the loaded ones."""
        ready_only = (await self.optional_json(request)).get("ready") is True
        places = (LOADED,) if ready_only else EVERYWHERE
        return StreamingResponse(self._index_parts(places), media_type="application/json")

    async def _index_parts(self, places: tuple[str, ...]) -> AsyncIterator[bytes]:
        """The index as a JSON array, one page of names a part; each page is read when the
        one before has been sent, from the last name sent."""
        after, separator = "", b"["
        while True:
            names = self.host.model_names().page(after, INDEX_PART_NAMES, places)
            if names:
                entries = ",".join(json.dumps(self._entry(n), separators=(",", ":")) for n in names)
                yield separator + entries.encode()
                after, separator = names[-1], b","
            if len(names) < INDEX_PART_NAMES:
                break
        yield b"[]" if separator == b"[" else b"]"

    async def load(self, request: Request) -> Response:
        """Load from the store, or from `parameters.url` (which `allowed_urls` must admit)."""
        self.http.authorize(request)
        name = model_in_path(request)
        parameters = (await self.optional_json(request)).get("parameters") or {}
        url = parameters.get("url") if isinstance(parameters, dict) else None
        if isinstance(url, str):
            check_param("parameters.url", url)
        if self._state(name) is State.LOADED:
            return Response(status_code=200)  # loaded already: nothing to do
        if isinstance(url, str):
            await self.host.register_and_load(name, url)
        else:
            await self.host.ensure_loaded(name)
        return Response(status_code=200)

    async def unload(self, request: Request) -> Response:
        """Unload after in-flight requests finish; a model not loaded is already unloaded."""
        self.http.authorize(request)
        name = model_in_path(request)
        if self._state(name) is State.LOADED:
            await self.host.unload(name)
        return Response(status_code=200)

    async def optional_json(self, request: Request) -> dict[str, Any]:
        """A JSON object body that may be left out (the repository calls take one optionally)."""
        body = await self.http.read_body(request)
        return json_object(body) if body.strip() else {}

    def _state(self, name: str) -> State | None:
        return self.host.state_of(name)

    def _entry(self, name: str) -> dict[str, str]:
        state = self._state(name)
        return {
            "name": name,
            "version": MODEL_VERSION,
            "state": REPOSITORY_STATE[state] if state else "UNAVAILABLE",
            "reason": "" if state else "not loaded; it loads on its first request or on load",
        }


def model_of(request: Request) -> tuple[str, str]:
    name = model_in_path(request)
    version = request.path_params.get("version", "")
    if version not in ("", MODEL_VERSION):
        raise ModelNotFound(
            f"model {name} has one version, {MODEL_VERSION}; leave the version out or ask for it"
        )
    return name, version


def header_length(request: Request, body_bytes: int) -> int | None:
    """The binary tensor data extension's JSON header length, checked against the body."""
    text = request.headers.get(HEADER_LENGTH_HEADER)
    if text is None:
        return None
    if not is_whole_number(text.strip()) or int(text) > body_bytes:
        raise BadRequestBody(
            f"Inference-Header-Content-Length {echo(text)} must be the byte length of the JSON "
            f"header at the start of the {body_bytes}-byte body"
        )
    return int(text)


def oip_response(result: Result) -> Response:
    """The worker's reply; binary data gets the extension's header and a binary media type."""
    response = invocation_response(result)
    if is_oip(result.content_type):
        response.headers["content-type"] = "application/octet-stream"
        length = header_length_of(result.content_type)
        if length is not None:
            response.headers["inference-header-content-length"] = str(length)
    return response
