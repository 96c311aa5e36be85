"""The JSON error body clients parse, with the status of the core exception it answers."""

from __future__ import annotations

from collections.abc import Callable

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import Scope

from modelhost import errors
from modelhost.http.invocation_paths import where_from
from modelhost.http.middleware import MODEL_BYTES_KEY
from modelhost.http.request_ids import request_id_header
from modelhost.protocols.not_served import not_served
from modelhost.protocols.status import status_of, type_name_of
from modelhost.protocols.torchserve_types import torchserve_type

RETRIED_STATUSES = (429, 503)
CHALLENGE = {"WWW-Authenticate": "Bearer"}  # a 401 must say how to authenticate (RFC 9110)
KSERVE_PREFIXES = ("/v2", "/v1/")  # KServe's protocols: `{"error": message}`
# MMS's and TorchServe's types for a path or method no route takes, as their clients read them
ROUTING_TYPES = {404: "ResourceNotFoundException", 405: "MethodNotAllowedException"}


def status_headers(status: int, retry_after_s: int = 1) -> dict[str, str] | None:
    """Retry-After on a status that invites a retry; the challenge on a 401."""
    if status == 401:
        return CHALLENGE
    return {"Retry-After": str(retry_after_s)} if status in RETRIED_STATUSES else None


def error_response(
    status: int, type_name: str, message: str, retry_after_s: int = 1, request_id: str = ""
) -> JSONResponse:
    body = {"code": status, "type": type_name, "message": message}
    response = JSONResponse(body, status, status_headers(status, retry_after_s))
    response.raw_headers.append(request_id_header(request_id))
    return response


def answer_error(
    request: Request, error: Exception, named: Callable[[errors.ModelhostError], str]
) -> Response:
    assert isinstance(error, errors.ModelhostError)
    status = status_of(error)
    response = error_response(status, named(error), str(error), error.retry_after_s)
    return told_load(response, request.scope, error)


def told_load(response: Response, scope: Scope, error: errors.ModelhostError) -> Response:
    """`response`, telling the load a failed request made."""
    loaded = error.loaded
    if loaded is not None:
        response.raw_headers += where_from(loaded.cache, loaded.tier, loaded.timings_ms)
        scope[MODEL_BYTES_KEY] = loaded.model_bytes
    return response


async def handle_modelhost_error(request: Request, error: Exception) -> Response:
    return answer_error(request, error, type_name_of)


async def handle_torchserve_error(request: Request, error: Exception) -> Response:
    """As `handle_modelhost_error`, with TorchServe's type names."""
    return answer_error(request, error, torchserve_type)


async def handle_http_exception(request: Request, error: Exception) -> Response:
    """Starlette's own refusals in the error shape of the path's protocol."""
    assert isinstance(error, HTTPException)
    path = request.url.path
    if error.status_code == 405 and (allowed := allowed_methods(request)):
        error.headers = {**(error.headers or {}), "Allow": allowed}
    message = f"{request.method} {path}: {error.detail}{way_out(error, path)}"
    if path.startswith(KSERVE_PREFIXES):
        return JSONResponse({"error": message}, error.status_code, error.headers)
    type_name = ROUTING_TYPES.get(error.status_code, "".join(str(error.detail).split()))
    response = error_response(error.status_code, type_name, message)
    response.headers.update(error.headers or {})
    return response


def allowed_methods(request: Request) -> str:
    """Every method the path's routes take; Starlette's Allow names the first route's alone."""
    routes = getattr(request.scope.get("router"), "routes", ())
    taken = set()
    for route in routes:
        methods = getattr(route, "methods", None)
        if methods and route.matches(request.scope)[0].value:  # Match.NONE is 0
            taken |= methods
    return ", ".join(sorted(taken))


def way_out(error: HTTPException, path: str) -> str:
    """What to send instead of a path or method no route takes."""
    why = not_served(path)
    if why is not None:
        return f"; {why}"
    if error.status_code == 404:
        return "; no route has this path: GET /openapi.json lists them"
    allowed = (error.headers or {}).get("Allow")  # Starlette's 405 names the path's methods
    return f"; this path takes {allowed}" if error.status_code == 405 and allowed else ""
