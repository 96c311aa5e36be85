"""The built-in handler for ONNX models, run by onnxruntime on the CPU (.onnx)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, ModelLoadError
from modelhost.workers.handlers.rows import RowsHandler
from modelhost.workers.handlers.runtime import require

SUFFIXES = (".onnx",)
INPUT_TYPES = {
    "tensor(float)": np.float32,
    "tensor(double)": np.float64,
    "tensor(float16)": np.float16,
    "tensor(int64)": np.int64,
    "tensor(int32)": np.int32,
}


class OnnxHandler(RowsHandler):
    """A one-input ONNX graph fed the rows; predict_proba reads its probabilities output."""

    def __init__(self, path: Path, threads: int = 1) -> None:
        ort = require("onnxruntime", "onnx", f"{path.name} (an ONNX model)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads  # 0: a thread per core in each worker
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session: Any = ort.InferenceSession(
            str(path), options, providers=["CPUExecutionProvider"]
        )
        self._input, self._dtype, self.n_features = _only_input(self._session, path.name)
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
        self._session = None


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
