"""Warm-up: the manifest's sample bodies, run after loading; all must succeed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from modelhost.errors import ModelLoadError
from modelhost.workers.codecs import CSV, JSON, NPY
from modelhost.workers.handlers.base import Handler, InferRequest

CONTENT_TYPES = {".json": JSON, ".csv": CSV, ".npy": NPY}


def warm_up(handler: Handler, model_name: str, root: Path, samples: Sequence[str]) -> None:
    """Answer each sample; on a failure close the handler and raise."""
    for sample in samples:
        try:
            handler.infer(_request(root, sample))
        except Exception as error:
            handler.close()
            raise ModelLoadError(
                f"could not load model {model_name}: warm-up sample {sample} failed: "
                f"{type(error).__name__}: {error}; fix the sample or the model, or remove it "
                "from warmup in modelhost.toml"
            ) from error


def _request(root: Path, sample: str) -> InferRequest:
    path = root / sample
    if not path.resolve().is_relative_to(root.resolve()) or not path.is_file():
        raise ModelLoadError(f"the artifact holds no file {sample}")
    return InferRequest(path.read_bytes(), CONTENT_TYPES.get(path.suffix.lower(), JSON))
