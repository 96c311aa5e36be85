"""What a model takes and gives, in the Open Inference Protocol's terms."""

from __future__ import annotations

from typing import Any

import msgspec

from modelhost.errors import ModelLoadError

ANY = -1  # a dimension of any size
DATATYPES = (
    *("BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"),
    *("FP16", "FP32", "FP64", "BYTES"),
)
_KEYS = ("name", "datatype", "shape")


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


def merged(own: Signature, inferred: Signature | None) -> Signature | None:
    """The manifest's parts, else the handler's."""
    inferred = inferred or Signature()
    signature = Signature(own.inputs or inferred.inputs, own.outputs or inferred.outputs)
    return signature if signature != Signature() else None


def declared(tables: object, key: str) -> tuple[TensorSpec, ...]:
    """MLServer's model-settings.json `inputs` or `outputs`."""
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ModelLoadError(f"{key} must be a list of tables with {', '.join(_KEYS)}")
    return tuple(_spec(table, f"{key}[{index}]") for index, table in enumerate(tables))


def _spec(table: dict[str, Any], where: str) -> TensorSpec:
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ModelLoadError(f"{where} has unknown keys {unknown}; allowed: {', '.join(_KEYS)}")
    name, datatype, shape = (table.get(key) for key in _KEYS)
    if not isinstance(name, str) or not name:
        raise ModelLoadError(f"{where} needs a name")
    if datatype not in DATATYPES:
        raise ModelLoadError(f"{where}: datatype {datatype!r} is not one of {', '.join(DATATYPES)}")
    if not isinstance(shape, list) or not all(type(n) is int and n >= ANY for n in shape):
        raise ModelLoadError(f"{where}: shape must be a list of sizes, -1 for any")
    return TensorSpec(name, str(datatype), tuple(shape))
