"""The JSON error body clients parse, with the status of the core exception it answers."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from modelhost import errors
from modelhost.protocols.status import status_of

RETRY_AFTER_S = {429: "1", 503: "1"}


def error_response(status: int, type_name: str, message: str) -> JSONResponse:
    headers = {"Retry-After": RETRY_AFTER_S[status]} if status in RETRY_AFTER_S else None
    return JSONResponse({"code": status, "type": type_name, "message": message}, status, headers)


async def handle_modelhost_error(request: Request, error: Exception) -> Response:
    assert isinstance(error, errors.ModelhostError)
    return error_response(status_of(error), type(error).__name__, str(error))


async def handle_http_exception(request: Request, error: Exception) -> Response:
    """Starlette's own refusals in the error shape of the path's protocol."""
    assert isinstance(error, HTTPException)
    message = f"{request.method} {request.url.path}: {error.detail}"
    if request.url.path.startswith("/v2"):
        return JSONResponse({"error": message}, error.status_code, error.headers)
    response = error_response(error.status_code, "HTTPException", message)
    response.headers.update(error.headers or {})
    return response
