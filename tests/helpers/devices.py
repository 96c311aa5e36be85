"""Torch models of a chosen size, for the fake devices' allocator to count."""

from __future__ import annotations

import warnings
from pathlib import Path

ROW = [[5.1, 3.5, 1.4, 0.2]]


def sized_torch(path: Path, size_bytes: int, seed: int = 0) -> Path:
    """A TorchScript model answering 3 logits for 4 features, padded to about `size_bytes` of
    tensors with a buffer it never reads."""
    import torch

    class Padded(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(seed)
            self.linear = torch.nn.Linear(4, 3)
            self.register_buffer("pad", torch.ones(max(0, size_bytes // 4 - 15)))

        def forward(self, rows: torch.Tensor) -> torch.Tensor:
            return self.linear(rows)

    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # TorchScript is deprecated; users still ship it
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(Padded().eval()), str(path))
    return path


def tensor_bytes(size_bytes: int) -> int:
    """What the fake allocator charges for `sized_torch(size_bytes)`: its weights and buffer."""
    return (max(0, size_bytes // 4 - 15) + 15) * 4


def in_process(path: Path) -> object:
    """A model's answer to ROW's one row, called in this process, as the server gives it."""
    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.load(str(path))
    with torch.inference_mode():
        return module(torch.tensor(ROW)).tolist()[0]
