"""The built-in handler for TensorFlow SavedModels (a folder with saved_model.pb), on the CPU.

The folder's serving signature is called with the rows; TensorFlow is imported by the worker
that loads the model, never by the template, since TensorFlow does not survive a fork.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, ModelLoadError
from modelhost.names import RUNTIME_SUFFIXES, SAVED_MODEL
from modelhost.workers.handlers.rows import RowsHandler
from modelhost.workers.handlers.runtime import require
from modelhost.workers.oip import datatype_of

SUFFIXES = RUNTIME_SUFFIXES["tensorflow"]
FILE_NAME = SAVED_MODEL
SIGNATURE = "serving_default"


def is_saved_model(path: Path) -> bool:
    return path.name == FILE_NAME


def latest_version(found: list[Path]) -> list[Path] | None:
    """The highest of several versions (`1/saved_model.pb`, `2/...`), as TensorFlow Serving
    serves by default; None unless every file found is a SavedModel in a numbered folder."""
    versions = [path for path in found if is_saved_model(path) and path.parent.name.isdigit()]
    if len(versions) < 2 or len(versions) != len(found):
        return None
    return [max(versions, key=lambda path: int(path.parent.name))]


class SavedModelHandler(RowsHandler):
    """A one-input serving signature fed the rows, its outputs chosen by name."""

    def __init__(self, path: Path, threads: int = 1) -> None:
        tf = require("tensorflow", "tensorflow", f"{path.parent.name}/ (a TensorFlow SavedModel)")
        _limit_threads(tf, threads)
        self._tf: Any = tf
        self._model: Any = tf.saved_model.load(str(path.parent))
        self._signature: Any = _serving_signature(self._model, path.parent.name)
        self._input, self._dtype, self.n_features = _only_input(self._signature, path.parent.name)
        self.input_name, self.input_datatype = self._input, datatype_of(self._dtype)
        self._outputs = _outputs_by_method(sorted(self._signature.structured_outputs))

    def predict(self, rows: np.ndarray, method: str) -> Any:
        wanted = self._outputs.get(method)
        if wanted is None:
            raise BadRequestBody("this SavedModel has no probabilities output; use predict")
        tensor = self._tf.constant(rows.astype(self._dtype))
        return self._signature(**{self._input: tensor})[wanted].numpy()

    def close(self) -> None:
        self._signature = self._model = None


def _outputs_by_method(outputs: list[str]) -> dict[str, str]:
    """predict: the one output, else the labels; predict_proba: the probabilities, if any."""
    scores = [name for name in outputs if "prob" in name.lower() or "score" in name.lower()]
    labels = [name for name in outputs if "class" in name.lower() or "predict" in name.lower()]
    others = [name for name in outputs if name not in scores]
    chosen = {"predict": (labels or others or outputs)[0]}
    return chosen | ({"predict_proba": scores[0]} if scores else {})


def _limit_threads(tf: Any, threads: int) -> None:
    """TensorFlow's pools, sized once per process: a later model finds them set."""
    with contextlib.suppress(RuntimeError):
        tf.config.threading.set_intra_op_parallelism_threads(threads)
        tf.config.threading.set_inter_op_parallelism_threads(1)


def _serving_signature(model: Any, folder: str) -> Any:
    signatures = dict(model.signatures)
    if SIGNATURE in signatures:
        return signatures[SIGNATURE]
    if len(signatures) == 1:
        return next(iter(signatures.values()))
    names = ", ".join(signatures) or "none"
    raise ModelLoadError(
        f"{folder}/ has no '{SIGNATURE}' signature to serve (found: {names}); save it with "
        "tf.saved_model.save(model, folder, signatures={'serving_default': ...})"
    )


def _only_input(signature: Any, folder: str) -> tuple[str, Any, int | None]:
    """The signature's one input: name, numpy type, and width if fixed."""
    inputs = signature.structured_input_signature[1]
    if len(inputs) != 1:
        raise ModelLoadError(
            f"{folder}/'s serving signature takes {len(inputs)} inputs ({', '.join(inputs)}); "
            "the built-in SavedModel handler feeds one matrix of rows: ship a handler.py that "
            "builds the inputs"
        )
    ((name, spec),) = inputs.items()
    if not (spec.dtype.is_floating or spec.dtype.is_integer):
        raise ModelLoadError(
            f"{folder}/'s serving signature takes {spec.dtype.name}; the built-in SavedModel "
            "handler feeds numbers: ship a handler.py for other inputs"
        )
    shape = spec.shape.as_list() if spec.shape.rank is not None else []
    width = shape[1] if len(shape) == 2 and isinstance(shape[1], int) else None
    return name, spec.dtype.as_numpy_dtype, width
