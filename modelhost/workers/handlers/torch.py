"""The built-in handler for TorchScript (.pt) and torch.export (.pt2) programs, on CPU or device."""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from modelhost.errors import BadRequestBody, ModelLoadError
from modelhost.names import RUNTIME_SUFFIXES
from modelhost.resources import usable_cores
from modelhost.workers.handlers.rows import RowsHandler, values_only
from modelhost.workers.handlers.runtime import require

SUFFIXES = RUNTIME_SUFFIXES["torch"]


class TorchHandler(RowsHandler):
    """A module called with the rows as a float32 tensor; answers its first output."""

    device_capable = True
    input_datatype = "FP32"

    def __init__(self, path: Path, threads: int = 1) -> None:
        torch = require("torch", "torch", f"{path.name} (a PyTorch model)")
        self._torch: Any = torch
        self.threads = limit_threads(torch, threads)
        self._module, self.n_features = _load(torch, path)
        self._device = "cpu"

    def predict(self, rows: np.ndarray, method: str) -> Any:
        values_only(None, method, "PyTorch")
        try:
            with intra_op_threads(self._torch, self.threads), self._torch.inference_mode():
                inputs = self._torch.from_numpy(rows.astype(np.float32)).to(self._device)
                output = self._module(inputs)
        except (RuntimeError, ValueError) as exc:  # how torch refuses a shape
            raise BadRequestBody(f"the model refused the input: {exc}") from exc
        if isinstance(output, (tuple, list)):
            output = output[0]
        return output.detach().cpu().numpy()

    def close(self) -> None:
        self._module = None

    def to_device(self, device: str) -> None:
        self._module, self._device = self._module.to(device), device

    def tensor_bytes(self) -> int:
        return module_bytes(self._module)


def module_bytes(module: Any) -> int:
    """Bytes of a module's parameters and buffers."""
    tensors = [*module.parameters(), *module.buffers()]
    return sum(int(t.numel()) * int(t.element_size()) for t in tensors)


def limit_threads(torch: Any, threads: int) -> int:
    """The intra-op threads a model runs with; the inter-op pool gets one thread."""
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(1)
    return max(1, min(threads, usable_cores()))


# one multi-threaded call at a time, else concurrent calls multiply the worker's threads
PARALLEL_CALLS = threading.Lock()


@contextlib.contextmanager
def intra_op_threads(torch: Any, threads: int) -> Iterator[None]:
    """Run the block on `threads` intra-op threads, then restore the thread's count.

    torch keeps the count per calling thread, so it is set around each call, not at load.
    """
    if threads == 1:
        with _count(torch, 1):
            yield
        return
    with PARALLEL_CALLS, _count(torch, threads):
        yield


@contextlib.contextmanager
def _count(torch: Any, threads: int) -> Iterator[None]:
    before = torch.get_num_threads()
    if before == threads:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _load(torch: Any, path: Path) -> tuple[Any, int | None]:
    """The module, and its row width where a .pt2's example input tells it."""
    if path.suffix == ".pt2":
        program = torch.export.load(str(path))
        return program.module(), _width(program.example_inputs)
    try:
        with warnings.catch_warnings():  # TorchScript is deprecated; users still ship it
            warnings.simplefilter("ignore", DeprecationWarning)
            module = torch.jit.load(str(path), map_location="cpu")
    except RuntimeError as exc:
        raise ModelLoadError(
            f"{path.name} is not a TorchScript archive ({exc}); save the model with "
            "torch.jit.save(torch.jit.script(model), ...), torch.export.save as .pt2, or ship a "
            "handler.py that builds it"
        ) from exc
    return module.eval(), None


def _width(example_inputs: Any) -> int | None:
    """The row width of an exported program's one 2-D example input."""
    args: tuple[Any, ...] = tuple(example_inputs[0]) if example_inputs else ()
    shape: tuple[int, ...] = tuple(getattr(args[0], "shape", ())) if len(args) == 1 else ()
    return int(shape[1]) if len(shape) == 2 else None
