"""The error body's `type` on TorchServe's and MMS's calls: their Java exception's name."""

from __future__ import annotations

from modelhost import errors
from modelhost.protocols.status import type_name_of

TYPE_BY_ERROR: dict[type[errors.ModelhostError], str] = {
    errors.BadRequestBody: "BadRequestException",
    errors.InvalidArchive: "InvalidModelException",
    errors.DownloadFailed: "DownloadArchiveException",
    errors.InvalidModelName: "BadRequestException",
    errors.ParameterTooLarge: "BadRequestException",
    errors.ModelNotFound: "ModelNotFoundException",
    errors.ModelVersionNotFound: "ModelVersionNotFoundException",
    errors.ModelNotLoaded: "ModelNotFoundException",
    errors.ModelAlreadyLoaded: "ConflictStatusException",
    errors.DefaultVersionKept: "InvalidModelVersionException",
    errors.ModelError: "InternalServerException",  # a worker's failure, whatever its status
    errors.DeadlineExceeded: "InternalServerException",  # TorchServe's worker died past it
    errors.Overloaded: "ServiceUnavailableException",
    errors.Unavailable: "ServiceUnavailableException",
}


def torchserve_type(error: errors.ModelhostError) -> str:
    """TorchServe's name for `error`'s most specific class in the table, else its own."""
    for cls in type(error).__mro__:
        if cls in TYPE_BY_ERROR:
            return TYPE_BY_ERROR[cls]
    return type_name_of(error)
