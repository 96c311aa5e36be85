"""The one table from core exceptions to statuses, which both transports answer with."""

from __future__ import annotations

from modelhost import errors

STATUS_BY_ERROR: dict[type[errors.ModelhostError], int] = {
    errors.BadRequestBody: 400,
    errors.UnsupportedMediaType: 415,
    errors.NotAcceptable: 406,
    errors.InvalidModelName: 400,
    errors.InvalidTenant: 400,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.ModelApiDisabled: 405,  # as TorchServe refuses the method
    errors.ModelNotFound: 404,
    errors.ModelNotLoaded: 404,
    errors.ModelAlreadyLoaded: 409,
    errors.TenantNotFound: 404,
    errors.NotServed: 404,
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


def status_of(error: errors.ModelhostError) -> int:
    """The status of `error`'s most specific class in the table (500 if none), or the one its
    handler named."""
    if isinstance(error, errors.HandlerError) and error.status:
        return error.status
    for cls in type(error).__mro__:
        if cls in STATUS_BY_ERROR:
            return STATUS_BY_ERROR[cls]
    return 500


def type_name_of(error: errors.ModelhostError) -> str:
    return error.type_name or type(error).__name__
