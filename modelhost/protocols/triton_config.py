"""Triton's model configuration, built from a model's OIP metadata."""

from __future__ import annotations

from typing import Any

Tensor = dict[str, Any]  # metadata's: name, datatype, shape
ANY = -1
MOST_ROWS = 2**31 - 1  # an int32
UNBATCHED = 0


def model_config(
    name: str,
    inputs: list[Tensor],
    outputs: list[Tensor],
    max_rows: int,
    batch_delay_ms: float | None,
) -> dict[str, Any]:
    """In Triton's JSON names; a first dimension of any size is the batch's."""
    tensors = [*inputs, *outputs]
    batched = bool(tensors) and all(spec["shape"][:1] == [ANY] for spec in tensors)
    config: dict[str, Any] = {
        "name": name,
        "platform": "modelhost",
        "backend": "",
        "max_batch_size": (max_rows or MOST_ROWS) if batched else UNBATCHED,
        "input": [_input(spec, batched) for spec in inputs],
        "output": [_output(spec, batched) for spec in outputs],
        "model_transaction_policy": {"decoupled": False},
    }
    if batched and batch_delay_ms is not None:
        delay_us = round(batch_delay_ms * 1000)
        config["dynamic_batching"] = {"max_queue_delay_microseconds": delay_us}
    return config


def _input(spec: Tensor, batched: bool) -> dict[str, Any]:
    extra = {"format": "FORMAT_NONE", "is_shape_tensor": False}
    return _tensor(spec, batched) | extra | {"allow_ragged_batch": False, "optional": False}


def _output(spec: Tensor, batched: bool) -> dict[str, Any]:
    return _tensor(spec, batched) | {"label_filename": "", "is_shape_tensor": False}


def _tensor(spec: Tensor, batched: bool) -> dict[str, Any]:
    dims = list(spec["shape"][1:] if batched else spec["shape"])
    tensor: dict[str, Any] = {
        "name": spec["name"],
        "data_type": data_type(spec["datatype"]),
        "dims": dims or [1],
    }
    if not dims:
        tensor["reshape"] = {"shape": []}
    return tensor


def data_type(datatype: str) -> str:
    """Triton's enum name of an OIP datatype."""
    return "TYPE_STRING" if datatype == "BYTES" else f"TYPE_{datatype}"
