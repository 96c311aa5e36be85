"""The built-in handler for ONNX models, run by onnxruntime (.onnx).

On the CPU, or on a CUDA device where onnxruntime has the CUDA execution provider
(onnxruntime-gpu). A session's providers are fixed when it is made, so a move to a device makes
a second session there; sleep drops it, and the session made at load answers again.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, ModelLoadError
from modelhost.names import RUNTIME_SUFFIXES
from modelhost.workers.handlers.rows import RowsHandler
from modelhost.workers.handlers.runtime import require
from modelhost.workers.oip import datatype_of

SUFFIXES = RUNTIME_SUFFIXES["onnx"]
INPUT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}
CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


class OnnxHandler(RowsHandler):
    """A one-input ONNX graph fed the rows; predict_proba reads its probabilities output."""

    torch_allocator = False  # its device memory is onnxruntime's arena

    def __init__(self, path: Path, threads: int = 1) -> None:
        ort = require("onnxruntime", "onnx", f"{path.name} (an ONNX model)")
        self._ort: Any = ort
        self._path = path
        self._options = options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: a thread per core in each worker
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._on_cpu: Any = ort.InferenceSession(str(path), options, providers=[CPU])
        self._session: Any = self._on_cpu
        self._input, self._dtype, self.n_features = _only_input(self._session, path.name)
        self.input_name, self.input_datatype = self._input, datatype_of(self._dtype)
        self._outputs: list[str] = [str(output.name) for output in self._session.get_outputs()]

    def predict(self, rows: np.ndarray, method: str) -> Any:
        wanted = self._output_for(method)
        (output,) = self._session.run([wanted], {self._input: rows.astype(self._dtype)})
        return _as_matrix(output)

    def _output_for(self, method: str) -> str:
        if method == "predict":
            return self._outputs[0]
        named = [name for name in self._outputs if "probab" in name.lower()]
        if named or len(self._outputs) > 1:
            return (named or self._outputs[1:])[0]
        raise BadRequestBody("this ONNX model has one output and no probabilities; use predict")

    def close(self) -> None:
        self._session = self._on_cpu = None

    @property
    def device_capable(self) -> bool:  # type: ignore[override]
        return CUDA in self._ort.get_available_providers()

    def to_device(self, device: str) -> None:
        """A session on `device` with its own copy of the weights; "cpu" drops it."""
        providers = providers_for(device, self._ort.get_available_providers())
        if providers == [CPU]:
            self._session = self._on_cpu
            return
        self._session = self._ort.InferenceSession(str(self._path), self._options, providers)

    def tensor_bytes(self) -> int:
        """The file's size: its initializers, which a session on a device copies there."""
        return self._path.stat().st_size


def providers_for(device: str, available: Sequence[str]) -> list[Any]:
    """The execution providers of a session on `device` (a torch name), CPU last.

    The arena grows by what each allocation asks, not by powers of two, so the device is
    charged what the model uses.
    """
    if device == "cpu" or CUDA not in available:
        return [CPU]
    index = int(device.partition(":")[2] or 0)
    return [(CUDA, {"device_id": index, "arena_extend_strategy": "kSameAsRequested"}), CPU]


def _only_input(session: Any, file_name: str) -> tuple[str, Any, int | None]:
    """The graph's one input: name, numpy type, and width if fixed."""
    inputs = session.get_inputs()
    if len(inputs) != 1:
        names = ", ".join(item.name for item in inputs)
        raise ModelLoadError(
            f"{file_name} takes {len(inputs)} inputs ({names}); the built-in ONNX handler feeds "
            "one matrix of rows: ship a handler.py that builds the inputs"
        )
    (item,) = inputs
    if item.type not in INPUT_TYPES:
        raise ModelLoadError(
            f"{file_name} takes {item.type}; the built-in ONNX handler feeds numbers "
            f"({', '.join(INPUT_TYPES)}): ship a handler.py for other inputs"
        )
    shape = item.shape
    width = shape[1] if len(shape) == 2 and isinstance(shape[1], int) else None
    return item.name, INPUT_TYPES[item.type], width


def _as_matrix(output: Any) -> Any:
    """skl2onnx's ZipMap output as rows of probabilities."""
    if isinstance(output, list) and output and isinstance(output[0], dict):
        return np.array([list(row.values()) for row in output])
    return output
