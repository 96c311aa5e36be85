"""Untrusted models in a worker: programs refused where no sandbox confines them, and the
sandbox's denials said as refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from modelhost.errors import ModelLoadError, UnsafeArtifact
from modelhost.workers.handlers.base import Handler
from modelhost.workers.handlers.select import LoadSpec, choose


def refuse_program(
    artifact: Path, model_name: str, spec: LoadSpec, reason: str, untrusted: str
) -> None:
    """Raise `UnsafeArtifact` if the model is code, saying why (`untrusted`: why the model is
    untrusted, `reason`: why no sandbox) and what to ship instead."""
    try:
        program = choose(artifact, model_name, spec).program
    except Exception:  # noqa: BLE001  (the load itself says what is wrong with the artifact)
        return
    if program:
        raise UnsafeArtifact(
            f"model {model_name} is {program}, code that can read and write this machine's "
            f"files, and this server refuses programs it cannot sandbox for untrusted models "
            f"({untrusted}): "
            f"{reason}; ship ONNX, XGBoost JSON/UBJ or LightGBM text instead, or run the "
            "server where Landlock and seccomp are available (Linux 6.12 or later)"
        )


def said_as_refusal(
    build: Callable[[], Handler], model_name: str, untrusted: str
) -> Callable[[], Handler]:
    """`build`, with a file the sandbox denied it raised as `UnsafeArtifact`, saying why the
    model is sandboxed (`untrusted`)."""

    def build_confined() -> Handler:
        try:
            return build()
        except ModelLoadError as exc:
            denied = exc.__cause__
            if not isinstance(denied, PermissionError):
                raise
            raise UnsafeArtifact(
                f"model {model_name} reached for {denied.filename}, which the sandbox of "
                f"untrusted models ({untrusted}) denies: a model reads only its own folder and "
                f"writes nothing ({denied.strerror})"
            ) from exc

    return build_confined
