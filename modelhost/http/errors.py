"""The one table from core exceptions to HTTP statuses, and the JSON error body clients parse."""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from modelhost import errors

STATUS_BY_ERROR: dict[type[errors.ModelhostError], int] = {
    errors.BadRequestBody: 400,
    errors.InvalidModelName: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.ModelNotFound: 404,
    errors.ModelNotLoaded: 404,
    errors.ModelAlreadyLoaded: 409,
    errors.PayloadTooLarge: 413,
    errors.ResponseTooLarge: 413,
    errors.HeaderTooLarge: 431,
    errors.ParameterTooLarge: 400,
    errors.Overloaded: 429,
    errors.ModelError: 500,
    errors.StoreError: 502,
    errors.Unavailable: 503,
    errors.StoreTimeout: 504,
    errors.DeadlineExceeded: 504,
    errors.CapacityError: 507,
}

RETRY_AFTER_S = {429: "1", 503: "1"}


def status_of(error: errors.ModelhostError) -> int:
    """The status of `error`'s most specific class in the table (500 if none)."""
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


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
