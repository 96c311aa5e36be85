"""What a model takes and gives, in the Open Inference Protocol's terms."""

from __future__ import annotations

from typing import Any

import msgspec

ANY = -1  # a dimension of any size


class TensorSpec(msgspec.Struct, frozen=True, array_like=True):
    name: str
    datatype: str
    shape: tuple[int, ...]

    def described(self) -> dict[str, Any]:
        return {"name": self.name, "datatype": self.datatype, "shape": list(self.shape)}


class Signature(msgspec.Struct, frozen=True, array_like=True):
    """What OIP infer takes and answers."""

    inputs: tuple[TensorSpec, ...] = ()
    outputs: tuple[TensorSpec, ...] = ()
