"""KServe's v1 data plane over REST: list, readiness, `:predict`, and `:explain` refused.

`{model}` may hold `/` and `:`; the verb is what follows the last `:`. A predict body reaches
the worker undecoded once KServe's checks pass (`modelhost.protocols.kserve_v1`).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from modelhost.errors import ModelNotFound, Unavailable
from modelhost.host import Invocation, Result, State
from modelhost.http.handler_heads import handler_head
from modelhost.http.middleware import ERROR_KEY, MODEL_BYTES_KEY
from modelhost.http.oip import Endpoint, oip_errors, oip_response
from modelhost.http.routes import SageMakerRoutes, model_in_path, name_advice
from modelhost.protocols.kserve_v1 import check_body, no_explainer, not_found, not_ready
from modelhost.protocols.params import check_headers, check_param, check_query
from modelhost.workers.answers import check_response_size

MODELS = "/v1/models"
MODEL = MODELS + "/{model:path}"
PREDICT = MODEL + ":predict"
EXPLAIN = MODEL + ":explain"
JSON = "application/json"
PASSED_ON = ("content-type",)  # to the worker
PAGE_NAMES = 1000  # names a page of the list, between which others' requests go through


class KserveV1Routes:
    def __init__(self, routes: SageMakerRoutes) -> None:
        self.http = routes
        self.host = routes.host

    def routes(self) -> list[Route]:
        """The verbs' paths first: the model's own would take them as part of its name."""
        table: list[tuple[str, Endpoint, str]] = [
            (MODELS, self.list_models, "GET"),
            (PREDICT, self.predict, "POST"),
            (EXPLAIN, self.explain, "POST"),
            (MODEL, self.model_ready, "GET"),
        ]
        # KServe's v1 and v2 share the error body, `{"error": message}`
        return [Route(path, oip_errors(endpoint), methods=[verb]) for path, endpoint, verb in table]

    async def list_models(self, request: Request) -> Response:
        """`{"models": [names]}`: every model of the store and the server, streamed a page of
        names at a time."""
        self.http.reads.across(request)
        return StreamingResponse(self._names(), media_type=JSON)

    async def _names(self) -> AsyncIterator[bytes]:
        after, opened = "", False
        while True:
            names = await self.host.model_names().with_store(after, PAGE_NAMES)
            if names:
                quoted = ",".join(json.dumps(name) for name in names).encode()
                yield (b"," if opened else b'{"models":[') + quoted
                after, opened = names[-1], True
            if len(names) < PAGE_NAMES:
                break
        yield b"]}" if opened else b'{"models":[]}'

    async def model_ready(self, request: Request) -> Response:
        """200 once loaded; 503 for a model known but not loaded, as KServe answers."""
        name = model_in_path(request)
        self.http.reads.model(request, name)
        held = self.host.resolve(name)
        if self.host.state_of(held) is State.LOADED:
            return JSONResponse({"name": name, "ready": True})
        await self._check_exists(name)
        raise Unavailable(not_ready(name, self.host.failed_load(held)))

    async def predict(self, request: Request) -> Response:
        """Through the host's invocation path, as every protocol's invocation."""
        name = model_in_path(request)
        check_headers(request.headers, PASSED_ON)
        body = await self.http.read_body(request)
        content_type = request.headers.get("content-type", JSON)
        check_body(body, content_type)
        tenant = self.http.tenant_of(request, name)
        invocation = Invocation(body, content_type, JSON, params_of(request), tenant)
        try:
            result = await self.host.invoke(name, invocation)
        except ModelNotFound as error:
            raise ModelNotFound(not_found(name, str(error))) from None
        check_response_size(len(result.body), self.http.settings.max_response_bytes)
        request.scope[MODEL_BYTES_KEY] = result.model_bytes
        return v1_reply(result)

    async def explain(self, request: Request) -> Response:
        """KServe's 501 for a model without an explainer, naming `:predict`."""
        name = model_in_path(request)
        self.http.reads.model(request, name)
        await self._check_exists(name)
        request.scope[ERROR_KEY] = "NotServed"
        return JSONResponse({"error": no_explainer(name)}, 501)

    async def _check_exists(self, name: str) -> None:
        if not await self.host.exists(name):
            raise ModelNotFound(not_found(name, name_advice(name)))


def params_of(request: Request) -> dict[str, str]:
    """The query's parameters, for the handler (`method=predict_proba`), capped."""
    query = request.url.query
    if not query:
        return {}
    check_query(query)
    return {key: check_param(key, value) for key, value in request.query_params.items()}


def v1_reply(result: Result) -> Response:
    """The worker's answer, with the status and headers a handler set, if any."""
    response = oip_response(result)
    if result.custom is not None:
        response.status_code, headers = handler_head(result.custom)
        response.raw_headers.extend(headers)
    return response
