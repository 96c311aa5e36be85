"""The one table from core exceptions to gRPC status codes, beside HTTP's in http/errors.py."""

from __future__ import annotations

import grpc

from modelhost import errors

CODE_BY_ERROR: dict[type[errors.ModelhostError], grpc.StatusCode] = {
    errors.BadRequestBody: grpc.StatusCode.INVALID_ARGUMENT,
    errors.UnsupportedMediaType: grpc.StatusCode.INVALID_ARGUMENT,  # HTTP's 415; gRPC has none
    errors.NotAcceptable: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidModelName: grpc.StatusCode.INVALID_ARGUMENT,
    errors.InvalidTenant: grpc.StatusCode.INVALID_ARGUMENT,
    errors.HeaderTooLarge: grpc.StatusCode.INVALID_ARGUMENT,
    errors.ParameterTooLarge: grpc.StatusCode.INVALID_ARGUMENT,
    errors.Unauthorized: grpc.StatusCode.UNAUTHENTICATED,
    errors.Forbidden: grpc.StatusCode.PERMISSION_DENIED,
    errors.ModelApiDisabled: grpc.StatusCode.PERMISSION_DENIED,  # as TorchServe refuses it
    errors.ModelNotFound: grpc.StatusCode.NOT_FOUND,
    errors.ModelNotLoaded: grpc.StatusCode.NOT_FOUND,
    errors.TenantNotFound: grpc.StatusCode.NOT_FOUND,
    errors.NotServed: grpc.StatusCode.UNIMPLEMENTED,
    errors.ModelAlreadyLoaded: grpc.StatusCode.ALREADY_EXISTS,
    errors.PayloadTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,  # as gRPC's own limit
    errors.ResponseTooLarge: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Overloaded: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.CapacityError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.ModelError: grpc.StatusCode.INTERNAL,
    errors.StoreError: grpc.StatusCode.INTERNAL,
    errors.StoreUnavailable: grpc.StatusCode.UNAVAILABLE,
    errors.StoreTimeout: grpc.StatusCode.DEADLINE_EXCEEDED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
    errors.DeadlineExceeded: grpc.StatusCode.DEADLINE_EXCEEDED,
}
RETRIED = (errors.Overloaded, errors.Unavailable)


def code_of(error: errors.ModelhostError) -> grpc.StatusCode:
    """The code of `error`'s most specific class in the table (INTERNAL if none)."""
    for cls in type(error).__mro__:
        if cls in CODE_BY_ERROR:
            return CODE_BY_ERROR[cls]
    return grpc.StatusCode.INTERNAL


def trailers_of(error: errors.ModelhostError) -> tuple[tuple[str, str], ...]:
    """Retry-After's seconds as a trailer, as HTTP sends it, where a retry is invited."""
    return (("retry-after", str(error.retry_after_s)),) if isinstance(error, RETRIED) else ()
