"""TorchServe's exception names for modelhost's errors, most specific class first."""

from __future__ import annotations

import pytest

from modelhost import errors
from modelhost.protocols.torchserve_types import torchserve_type


@pytest.mark.parametrize(
    ("error", "type_name"),
    [
        (errors.ModelNotFound("m"), "ModelNotFoundException"),
        (errors.ModelVersionNotFound("m/9"), "ModelVersionNotFoundException"),
        (errors.BadRequestBody("b"), "BadRequestException"),
        (errors.InvalidArchive("a"), "InvalidModelException"),
        (errors.DownloadFailed("d"), "DownloadArchiveException"),
        (errors.ModelAlreadyLoaded("m"), "ConflictStatusException"),
        (errors.DefaultVersionKept("d"), "InvalidModelVersionException"),
        (errors.ModelApiDisabled("off"), "MethodNotAllowedException"),
        (errors.HandlerError("h", 422), "InternalServerException"),
        (errors.ModelLoadError("l"), "InternalServerException"),
        (errors.DeadlineExceeded("late"), "InternalServerException"),
        (errors.TenantQueueFull("full"), "ServiceUnavailableException"),
        (errors.WorkerDied("gone"), "ServiceUnavailableException"),
        (errors.ShuttingDown("bye"), "ServiceUnavailableException"),
    ],
)
def test_an_error_is_named_as_torchserve_names_it(
    error: errors.ModelhostError, type_name: str
) -> None:
    assert torchserve_type(error) == type_name


def test_an_error_torchserve_has_no_name_for_keeps_modelhosts() -> None:
    """507 and a store's failure have no TorchServe counterpart of their status."""
    assert torchserve_type(errors.InsufficientMemory("m")) == "InsufficientMemory"
    assert torchserve_type(errors.StoreTimeout("s")) == "StoreTimeout"
