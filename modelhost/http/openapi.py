"""The OpenAPI 3.1 document of every route, and docs/api.md made from it.

A route with no entry in `OPERATIONS` fails the build, so an undocumented route cannot ship.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Collection, Sequence
from importlib import metadata
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from modelhost.protocols.keys import RENEWABLE

Schema = dict[str, Any]
_JSON = "application/json"

ERROR: Schema = {
    "type": "object",
    "required": ["code", "type", "message"],
    "properties": {
        "code": {"type": "integer"},
        "type": {"type": "string"},
        "message": {"type": "string", "description": "what went wrong and what to do"},
    },
}
OIP_ERROR: Schema = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {"type": "string"}},
}
OBJECT: Schema = {"type": "object"}
ANY: Schema = {}
STATUS: Schema = {
    "type": "object",
    "required": ["status"],
    "properties": {"status": {"type": "string"}},
}
TENSOR: Schema = {
    "type": "object",
    "required": ["name", "shape", "datatype"],
    "properties": {
        "name": {"type": "string"},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
        "datatype": {
            "enum": ["BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32"]
            + ["INT64", "FP16", "FP32", "FP64", "BYTES"]
        },
        "parameters": OBJECT,
        "data": {"type": "array"},
    },
}
INFER_REQUEST: Schema = {
    "type": "object",
    "required": ["inputs"],
    "properties": {
        "id": {"type": "string"},
        "parameters": OBJECT,
        "inputs": {"type": "array", "items": TENSOR},
        "outputs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "parameters": OBJECT},
            },
        },
    },
}
INFER_RESPONSE: Schema = {
    "type": "object",
    "required": ["model_name", "outputs"],
    "properties": {
        "model_name": {"type": "string"},
        "model_version": {"type": "string"},
        "id": {"type": "string"},
        "outputs": {"type": "array", "items": TENSOR},
    },
}
LIVE: Schema = {"type": "object", "required": ["live"], "properties": {"live": {"type": "boolean"}}}
READY: Schema = {
    "type": "object",
    "required": ["ready"],
    "properties": {"ready": {"type": "boolean"}},
}
NOT_READY = "not loaded, or not a valid model name"  # names.model_name refuses it
MODEL_READY: Schema = {
    "type": "object",
    "required": ["name", "ready"],
    "properties": {"name": {"type": "string"}, "ready": {"type": "boolean"}},
}
V1_MODELS: Schema = {
    "type": "object",
    "required": ["models"],
    "properties": {"models": {"type": "array", "items": {"type": "string"}}},
}
V1_INSTANCES: Schema = {
    "type": "object",
    "properties": {"instances": {"type": "array"}, "inputs": {}},
}
V1_PREDICTIONS: Schema = {"type": "object", "properties": {"predictions": {"type": "array"}}}
REPOSITORY_INDEX: Schema = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name"],  # a model never loaded has its name alone, as in Triton's
        "properties": {
            "name": {"type": "string"},
            "version": {"type": "string"},
            "state": {"enum": ["READY", "LOADING", "UNLOADING", "UNAVAILABLE"]},
            "reason": {"type": "string"},
        },
    },
}
MODEL_PAGE: Schema = {
    "type": "object",
    "required": ["models"],
    "properties": {
        "models": {"type": "array", "items": OBJECT},
        "nextPageToken": {"type": "string"},
        "next_page_token": {"type": "string"},
    },
}

FORM: Schema = {
    "type": "object",
    "description": "the input is the part named data, else body, else the only file; other "
    "text fields are parameters (modelhost.http.forms)",
    "properties": {"data": {"type": "string", "format": "binary"}},
}
INVOKE_BODY = {
    "application/json": ANY,
    "text/csv": {"type": "string"},
    "application/x-npy": {"type": "string", "format": "binary"},
    "multipart/form-data": FORM,
    "application/x-www-form-urlencoded": FORM,
}
MODEL = {"name": "model", "in": "path", "required": True, "schema": {"type": "string"}}
TENANT = {"name": "tenant", "in": "path", "required": True, "schema": {"type": "string"}}
VERSION = {"name": "version", "in": "path", "required": True, "schema": {"type": "string"}}
LIMIT = {"name": "limit", "in": "query", "schema": {"type": "integer", "minimum": 1}}
CURSOR = "the nextPageToken of the page before: a cursor, the last name it listed"
PAGE = [
    LIMIT,
    {"name": "next_page_token", "in": "query", "schema": {"type": "string"}, "description": CURSOR},
    {
        "name": "state",
        "in": "query",
        "schema": {"enum": ["loaded", "on_disk", "registered"]},
        "description": "only the models loaded, those whose artifact is on disk, or those "
        "registered with a URL of their own",
    },
]
TORCHSERVE_PAGE = [
    LIMIT,
    {
        "name": "next_page_token",
        "in": "query",
        "schema": {"type": "string"},
        "description": CURSOR + "; a whole number is read as an offset, as TorchServe's are",
    },
]
METHOD = {
    "name": "method",
    "in": "query",
    "schema": {"enum": ["predict", "predict_proba"]},
    "description": "the estimator method to run (built-in handlers)",
}

REASONS = {
    200: "OK",
    202: "accepted: loading in the background",
    400: "the request cannot be decoded or is invalid",
    401: "management call without the configured bearer token; under --tenant-from token, an "
    "invocation without a tenant's token",
    403: "management call from outside loopback, or a URL outside allowed_urls",
    404: "no such model (in the store, or loaded where the call asks for it)",
    409: "the model is already loaded or registered",
    413: "the body is larger than max_request_size",
    406: "an Accept header no built-in codec answers: ask for application/json, text/csv or "
    "application/x-npy",
    415: "a body of a Content-Type the call does not read: invocations of built-in handlers "
    "take application/json, text/csv or application/x-npy; calls that change the server's "
    "state take application/json (no simple cross-site request can send it)",
    429: "the model's queue (job_queue_size) or the server (max_concurrency) is full, or the "
    "tenant is past its rate (the tenants file); retry after Retry-After",
    431: "a header the call reads (Accept, Content-Type, the target model) is over 4096 characters",
    500: "the handler raised, or the model could not be loaded",
    502: "the model store refused or kept failing",
    503: "shutting down, or the worker died mid-request; a retry is safe",
    504: "no answer within default_response_timeout, or the model store sent nothing for "
    "store_timeout_s",
    507: "the model cannot fit in the memory or disk budget",
}
KEY_SCHEME = "key"
KEY: Schema = {
    "type": "http",
    "scheme": "bearer",
    "description": "TorchServe's token authorization: a key of key_file.json, the management "
    "key for management calls, the API key for the token API, the inference key for the others",
}
KEY_REFUSED = "no key, or not the key this call needs (TorchServe's token authorization)"
INVOKE_ERRORS = (400, 401, 404, 413, 429, 500, 502, 503, 504, 507)
CODEC_ERRORS = (406, 415)  # the built-in handlers' codecs: Accept, Content-Type
LOAD_ERRORS = (400, 401, 403, 404, 409, 415, 500, 502, 503, 504, 507)


def responses(
    ok: dict[str, Schema] | None,
    errors: Sequence[int] = (),
    error: Schema = ERROR,
    also: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A 200 with the given media types, and each error status in `errors`."""
    table: dict[str, Any] = {"200": {"description": "OK"}}
    if ok:
        table["200"]["content"] = {kind: {"schema": schema} for kind, schema in ok.items()}
    for status in errors:
        table[str(status)] = {
            "description": REASONS[status],
            "content": {"application/json": {"schema": error}},
        }
    table.update(also or {})
    return table


def json_response(status: int, description: str, schema: Schema) -> dict[str, Any]:
    return {str(status): {"description": description, "content": {_JSON: {"schema": schema}}}}


def operation(
    summary: str,
    tag: str,
    ok: dict[str, Schema] | None,
    errors: Sequence[int] = (),
    *,
    parameters: Sequence[Schema] = (),
    body: dict[str, Schema] | None = None,
    body_required: bool = True,
    error: Schema = ERROR,
    also: dict[str, Any] | None = None,
) -> dict[str, Any]:
    described: dict[str, Any] = {
        "summary": summary,
        "tags": [tag],
        "responses": responses(ok, errors, error, also),
    }
    if parameters:
        described["parameters"] = list(parameters)
    for status in (400, 404) if any(p["in"] == "path" for p in parameters) else ():
        # 400: an invalid model name; 404: one no route matches
        described["responses"].setdefault(
            str(status), {"description": REASONS[status], "content": {_JSON: {"schema": error}}}
        )
    if body:
        content = {kind: {"schema": schema} for kind, schema in body.items()}
        described["requestBody"] = {"required": body_required, "content": content}
    return described


def _invoke(summary: str, tag: str, extra: Sequence[Schema] = ()) -> dict[str, Any]:
    any_body = {"*/*": {"type": "string", "format": "binary"}}
    return operation(
        summary,
        tag,
        any_body,
        sorted((*INVOKE_ERRORS, *CODEC_ERRORS, 431)),
        parameters=[*extra, METHOD],
        body=INVOKE_BODY,
    )


def _oip(
    summary: str, ok: dict[str, Schema] | None, errors: Sequence[int] = (), **kw: Any
) -> dict[str, Any]:
    return operation(summary, "Open Inference Protocol", ok, errors, error=OIP_ERROR, **kw)


def _oip_infer(parameters: Sequence[Schema]) -> dict[str, Any]:
    header_length = {
        "name": "Inference-Header-Content-Length",
        "in": "header",
        "schema": {"type": "integer", "minimum": 0},
        "description": "binary tensor data: the length of the JSON header that starts the body",
    }
    binary = {"type": "string", "format": "binary"}
    return _oip(
        "infer with typed tensors (JSON, or a JSON header and binary tensor data)",
        {"application/json": INFER_RESPONSE, "application/octet-stream": binary},
        INVOKE_ERRORS,
        parameters=[*parameters, header_length],
        body={"application/json": INFER_REQUEST, "application/octet-stream": binary},
    )


def _kserve_v1(summary: str, ok: dict[str, Schema] | None, errors: Sequence[int], **kw: Any) -> Any:
    return operation(summary, "KServe v1", ok, errors, error=OIP_ERROR, parameters=_OIP_MODEL, **kw)


_SAGEMAKER, _TORCHSERVE, _OBSERVE = "SageMaker", "TorchServe", "Observability"
_OIP_MODEL = (MODEL,)
_OIP_VERSION = (MODEL, VERSION)
TOKEN_API = operation(
    "renew the management or inference key, with the API key (TorchServe's token API)",
    _TORCHSERVE,
    {_JSON: STATUS},
    (400, 401),
    parameters=[
        {"name": "type", "in": "query", "required": True, "schema": {"enum": list(RENEWABLE)}}
    ],
)

# (method, path) → operation; paths as the app declares them, with Starlette's `:path`
OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("GET", "/ping"): operation(
        "health: 200 once ready, 503 while starting or stopping",
        _SAGEMAKER,
        {_JSON: STATUS},
        also=json_response(503, REASONS[503], STATUS),
    ),
    ("GET", "/execution-parameters"): operation(
        "batch transform's defaults: MaxConcurrentTransforms, BatchStrategy, MaxPayloadInMB",
        _SAGEMAKER,
        {_JSON: OBJECT},
    ),
    ("GET", "/stats"): operation(
        "memory and disk budgets and use; workers", _OBSERVE, {_JSON: OBJECT}
    ),
    ("POST", "/invocations"): _invoke(
        "invoke the model named by X-Amzn-SageMaker-Target-Model (or --single-model)",
        _SAGEMAKER,
        [
            {"name": "X-Amzn-SageMaker-Target-Model", "in": "header", "schema": {"type": "string"}},
            {
                "name": "X-Amzn-SageMaker-Custom-Attributes",
                "in": "header",
                "schema": {"type": "string"},
            },
        ],
    ),
    ("GET", "/models"): operation(
        "models known to the server, paginated",
        _SAGEMAKER,
        {_JSON: MODEL_PAGE},
        (400,),
        parameters=PAGE,
    ),
    ("POST", "/models"): operation(
        'load {"model_name", "url"}',
        _SAGEMAKER,
        {_JSON: OBJECT},
        LOAD_ERRORS,
        body={
            _JSON: {
                "type": "object",
                "required": ["model_name", "url"],
                "properties": {"model_name": {"type": "string"}, "url": {"type": "string"}},
            }
        },
    ),
    ("POST", "/models/{model:path}/invoke"): _invoke(
        "invoke (SageMaker multi-model container contract)", _SAGEMAKER, _OIP_MODEL
    ),
    ("GET", "/models/{model:path}"): operation(
        "describe a loaded model", _SAGEMAKER, {_JSON: OBJECT}, (400, 404), parameters=_OIP_MODEL
    ),
    ("DELETE", "/models/{model:path}"): operation(
        "unload, after in-flight requests finish (later ones load it again)",
        _SAGEMAKER,
        {_JSON: OBJECT},
        (400, 401, 403, 404, 415),
        parameters=_OIP_MODEL,
    ),
    ("POST", "/predictions/{model:path}"): _invoke(
        "invoke (TorchServe / MMS clients): `{model}` its default version, `{model}/{version}` "
        "that version",
        _TORCHSERVE,
        _OIP_MODEL,
    ),
    ("PUT", "/predictions/{model:path}"): _invoke(
        "invoke with the body as sent by `curl -T` (TorchServe's quick start)",
        _TORCHSERVE,
        _OIP_MODEL,
    ),
    ("POST", "/explanations/{model:path}"): _invoke(
        "the handler's explanation: its call with the `explain: True` header (TorchServe)",
        _TORCHSERVE,
        _OIP_MODEL,
    ),
    **{
        (method, "/predictions/{model:path}"): _invoke(
            f"invoke, as TorchServe hands a {method} to the model", _TORCHSERVE, _OIP_MODEL
        )
        for method in ("GET", "DELETE", "PATCH")
    },
    ("GET", "/"): operation(
        "the dashboard (Accept: text/html), else KServe's liveness",
        _OBSERVE,
        {"text/html": {"type": "string"}, "application/json": {"type": "object"}},
    ),
    ("GET", "/metrics"): operation(
        "Prometheus metrics", _OBSERVE, {"text/plain": {"type": "string"}}
    ),
    ("GET", "/events"): operation(
        "the live event stream (server-sent events)",
        _OBSERVE,
        {"text/event-stream": {"type": "string"}},
        (400, 503),
        parameters=[
            {"name": "model", "in": "query", "schema": {"type": "string"}},
            {"name": "last_event_id", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer", "minimum": 0}},
        ],
    ),
    ("GET", "/sizing"): operation(
        "the live miss-ratio curve: hit ratio at every budget, the budget each target hit ratio "
        "needs, instances needed, the thrash alarm",
        _OBSERVE,
        {_JSON: OBJECT},
        (400,),
        parameters=[
            {
                "name": "window",
                "in": "query",
                "schema": {"type": "string", "enum": ["hour", "day"], "default": "hour"},
            }
        ],
    ),
    ("GET", "/tenants"): operation(
        "each tenant's requests, latency, worker time and refusals, paginated; 404 while "
        "tenants are off",
        _OBSERVE,
        {_JSON: OBJECT},
        (400, 404),
        parameters=PAGE[:2],
    ),
    ("GET", "/tenants/{tenant:path}"): operation(
        "one tenant's figures",
        _OBSERVE,
        {_JSON: OBJECT},
        (404,),
        parameters=[TENANT],
    ),
    ("GET", "/openapi.json"): operation("this document", "Meta", {_JSON: OBJECT}),
    # Open Inference Protocol
    ("GET", "/v2"): _oip(
        "server metadata: name, version, extensions",
        {
            _JSON: {
                "type": "object",
                "required": ["name", "version", "extensions"],
                "properties": {"extensions": {"type": "array", "items": {"type": "string"}}},
            }
        },
    ),
    ("GET", "/v2/health/live"): _oip("liveness", {_JSON: LIVE}),
    ("GET", "/v2/health/ready"): _oip(
        "readiness: 200 when ready, 400 when not (the protocol asks for a 4xx)",
        {_JSON: READY},
        also=json_response(400, "not ready", READY),
    ),
    ("POST", "/v2/repository/index"): _oip(
        "every model of the store and the server, loaded or not, with Triton's version, state "
        "and reason",
        {_JSON: REPOSITORY_INDEX},
        (400, 502, 504),
        body={_JSON: {"type": "object", "properties": {"ready": {"type": "boolean"}}}},
        body_required=False,
    ),
    ("POST", "/v2/repository/models/{model:path}/load"): _oip(
        "load from the store, or from parameters.url",
        None,
        LOAD_ERRORS,
        parameters=_OIP_MODEL,
        body={_JSON: {"type": "object", "properties": {"parameters": OBJECT}}},
        body_required=False,
    ),
    ("POST", "/v2/repository/models/{model:path}/unload"): _oip(
        "unload (a model not loaded is already unloaded)",
        None,
        (401, 403, 415),
        parameters=_OIP_MODEL,
    ),
    ("GET", "/v2/models/{model:path}"): _oip(
        "model metadata (a model's inputs and outputs as its last load told, empty before); "
        "Triton's `{model}/stats` (counters) and `{model}/config` (its configuration, from the "
        "metadata)",
        {_JSON: OBJECT},
        (404,),
        parameters=_OIP_MODEL,
    ),
    ("GET", "/v2/models/{model:path}/versions/{version}"): _oip(
        "model metadata of a version: a registered model's versions are its archives', any "
        "other model's is 1",
        {_JSON: OBJECT},
        (404,),
        parameters=_OIP_VERSION,
    ),
    ("GET", "/v2/models/{model:path}/ready"): _oip(
        "model readiness: 200 when loaded, 400 when not",
        {_JSON: MODEL_READY},
        (404,),
        parameters=_OIP_MODEL,
        also=json_response(400, NOT_READY, {"oneOf": [MODEL_READY, OIP_ERROR]}),
    ),
    ("GET", "/v2/models/{model:path}/versions/{version}/ready"): _oip(
        "readiness of a version of the model",
        {_JSON: MODEL_READY},
        (404,),
        parameters=_OIP_VERSION,
        also=json_response(400, NOT_READY, {"oneOf": [MODEL_READY, OIP_ERROR]}),
    ),
    ("POST", "/v2/models/{model:path}/infer"): _oip_infer(_OIP_MODEL),
    ("POST", "/v2/models/{model:path}/versions/{version}/infer"): _oip_infer(_OIP_VERSION),
    # KServe's v1 data plane
    ("GET", "/v1/models"): operation(
        "the names of the models known to the server",
        "KServe v1",
        {_JSON: V1_MODELS},
        error=OIP_ERROR,
    ),
    ("GET", "/v1/models/{model:path}"): _kserve_v1(
        "model readiness: 200 when loaded, 503 when known but not loaded",
        {_JSON: MODEL_READY},
        (404, 503),
    ),
    ("POST", "/v1/models/{model:path}:predict"): _kserve_v1(
        'predict: {"instances": [...]} or {"inputs": [...]} in, {"predictions": [...]} out; '
        "other types reach the model as sent",
        {_JSON: V1_PREDICTIONS},
        INVOKE_ERRORS,
        body={_JSON: V1_INSTANCES, "*/*": {"type": "string", "format": "binary"}},
    ),
    ("POST", "/v1/models/{model:path}:explain"): _kserve_v1(
        "not served: 501 naming :predict (modelhost has no explainer)",
        None,
        (404,),
        also=json_response(501, "explanations are not served", OIP_ERROR),
    ),
}

# TorchServe's management API, on --management-port
TORCHSERVE_OPERATIONS: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/models"): operation(
        "register a model from url; load it now when initial_workers > 0",
        _TORCHSERVE,
        {_JSON: STATUS},
        LOAD_ERRORS,
        parameters=[
            {"name": "url", "in": "query", "required": True, "schema": {"type": "string"}},
            {"name": "model_name", "in": "query", "schema": {"type": "string"}},
            {"name": "initial_workers", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "synchronous", "in": "query", "schema": {"type": "boolean"}},
        ],
        also=json_response(202, REASONS[202], STATUS),
    ),
    ("GET", "/models"): operation(
        "registered models, paginated",
        _TORCHSERVE,
        {_JSON: MODEL_PAGE},
        (400,),
        parameters=TORCHSERVE_PAGE,
    ),
    ("GET", "/models/{model:path}"): operation(
        "describe: a list of one description (`{model}`: the default version, "
        "`{model}/{version}`: that version), or of every version (`{model}/all`)",
        _TORCHSERVE,
        {_JSON: {"type": "array", "items": OBJECT}},
        (404,),
        parameters=[
            *_OIP_MODEL,
            {"name": "customized", "in": "query", "schema": {"type": "boolean"}},
        ],
    ),
    ("DELETE", "/models/{model:path}"): operation(
        "unregister a version (`{model}`: the default, refused with 403 while other versions "
        "exist): unload it, and forget its URL",
        _TORCHSERVE,
        {_JSON: STATUS},
        (401, 403, 404, 415, 503),
        parameters=_OIP_MODEL,
    ),
    ("PUT", "/models/{model:path}"): operation(
        "scale a version (`{model}`: the default): load on min_worker workers now, scale out "
        "up to max_worker; `PUT /models/{model}/{version}/set-default` makes that version the "
        "default",
        _TORCHSERVE,
        {_JSON: STATUS},
        (400, 401, 403, 404, 415, 503, 507),
        parameters=[
            *_OIP_MODEL,
            {"name": "min_worker", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "max_worker", "in": "query", "schema": {"type": "integer", "minimum": 0}},
            {"name": "synchronous", "in": "query", "schema": {"type": "boolean"}},
        ],
        also=json_response(202, REASONS[202], STATUS),
    ),
    ("GET", "/openapi.json"): operation("this document", "Meta", {_JSON: OBJECT}),
}

METRICS_OPERATIONS: dict[tuple[str, str], Schema] = {
    key: OPERATIONS[key] for key in (("GET", "/metrics"), ("GET", "/openapi.json"))
}

FLAVOURS = {
    "main": ("modelhost", OPERATIONS),
    "torchserve": ("modelhost: TorchServe management API", TORCHSERVE_OPERATIONS),
    "metrics": ("modelhost: TorchServe metrics API", METRICS_OPERATIONS),
}


def openapi_path(starlette_path: str) -> str:
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", starlette_path)


def route_keys(routes: Sequence[BaseRoute]) -> set[tuple[str, str]]:
    """(method, path) of each route, HEAD left out (Starlette adds it to every GET)."""
    return {
        (method, route.path)
        for route in routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }


def document(routes: Sequence[BaseRoute], flavour: str) -> dict[str, Any]:
    """The document of `routes`; KeyError names a route with no entry in the table."""
    title, table = FLAVOURS[flavour]
    paths: dict[str, dict[str, Any]] = {}
    for method, path in sorted(route_keys(routes)):
        if (method, path) not in table:
            raise KeyError(f"{method} {path} has no entry in modelhost.http.openapi")
        paths.setdefault(openapi_path(path), {})[method.lower()] = table[(method, path)]
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": metadata.version("modelhost")},
        "paths": paths,
    }


def keyed(
    doc: dict[str, Any], open_calls: Collection[tuple[str, str]], token_path: str | None
) -> dict[str, Any]:
    """`doc` behind the token guard, which serves the token API on `token_path` if any."""
    served = {**doc["paths"], **({token_path: {"get": TOKEN_API}} if token_path else {})}
    paths = {
        path: {
            verb: _keyed(op, path, (verb.upper(), path) in open_calls) for verb, op in ops.items()
        }
        for path, ops in served.items()
    }
    return {**doc, "paths": paths, "components": {"securitySchemes": {KEY_SCHEME: KEY}}}


def _keyed(operation: dict[str, Any], path: str, is_open: bool) -> dict[str, Any]:
    if is_open:
        return {**operation, "security": []}
    error = OIP_ERROR if path.startswith(("/v2", "/v1/")) else ERROR
    refused = {"description": KEY_REFUSED, "content": {_JSON: {"schema": error}}}
    responses = {**operation["responses"], "401": refused}
    return {**operation, "security": [{KEY_SCHEME: []}], "responses": responses}


class OpenApiRoute(Route):
    """`GET /openapi.json` and TorchServe's discovery calls."""

    def __init__(self, served: Sequence[BaseRoute], flavour: str) -> None:
        super().__init__("/openapi.json", self.serve, methods=["GET"])
        self.document = document([*served, self], flavour)

    def require_keys(self, open_calls: Collection[tuple[str, str]], token_path: str | None) -> None:
        """Describe the port as its token guard answers it."""
        self.document = keyed(self.document, open_calls, token_path)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http" and is_discovery(scope["method"], scope["path"]):
            return Match.FULL, {"endpoint": self.endpoint, "path_params": {}}
        return super().matches(scope)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if is_discovery(scope["method"], scope["path"]):  # any method, as TorchServe answers
            await self.app(scope, receive, send)
        else:
            await super().handle(scope, receive, send)

    async def serve(self, request: Request) -> Response:
        return JSONResponse(self.document)


def is_discovery(method: str, path: str) -> bool:
    """TorchServe's API discovery: `OPTIONS /`, or `/api-description` by any method."""
    return path == "/api-description" or (path == "/" and method == "OPTIONS")


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"## {doc['info']['title']}", "", "| method | path | what it does | statuses |"]
    lines.append("|---|---|---|---|")
    for path, methods in doc["paths"].items():
        for method, described in methods.items():
            statuses = ", ".join(sorted(described["responses"]))
            lines.append(f"| {method.upper()} | `{path}` | {described['summary']} | {statuses} |")
    return "\n".join(lines) + "\n"


def table_document(flavour: str) -> dict[str, Any]:
    """The document of every operation in a table."""
    title, table = FLAVOURS[flavour]
    paths: dict[str, dict[str, Any]] = {}
    for (method, path), described in table.items():
        paths.setdefault(openapi_path(path), {})[method.lower()] = described
    return {"info": {"title": title}, "paths": paths}


def api_markdown() -> str:
    """docs/api.md: the operations of both documents."""
    header = (
        "# HTTP API\n\nGenerated from the OpenAPI documents the server serves at "
        "`GET /openapi.json` (on the main port, and on `--management-port` for TorchServe's "
        "management API); regenerate with `python -m modelhost.http.openapi > docs/api.md`. The "
        "documents hold the parameters and the request and response schemas.\n\n"
    )
    return header + "\n".join(markdown(table_document(flavour)) for flavour in FLAVOURS)


if __name__ == "__main__":
    sys.stdout.write(api_markdown())
