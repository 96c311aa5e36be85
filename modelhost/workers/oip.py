"""Open Inference Protocol (KServe v2) bodies to tensors and rows, and outputs back."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelhost.documents import json_object
from modelhost.errors import BadRequestBody
from modelhost.names import OIP_VERSION, echo
from modelhost.workers.oip_media import header_length_of, oip_media_type

DTYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BYTES": np.dtype(object),
}
NOT_FEATURES = ("BOOL", "UINT8", "BYTES")
FLAG, COUNT = "true or false", "a whole number, 0 or more"


def _is_flag(value: Any) -> bool:
    return isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_id(value: Any) -> bool:
    return _is_count(value) or isinstance(value, str)


# Triton's request parameters: each JSON type's test, and its words
TRITON_PARAMETERS: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(("binary_data_output", "sequence_start", "sequence_end"), (_is_flag, FLAG)),
    **dict.fromkeys(("priority", "timeout"), (_is_count, COUNT)),
    "sequence_id": (_is_id, COUNT + ", or a string"),
}
_LENGTH = struct.Struct("<I")  # before each BYTES element in binary data


@dataclass(frozen=True)
class Tensor:
    """One named, typed tensor of an OIP request or response."""

    name: str
    datatype: str
    values: np.ndarray  # BYTES tensors hold bytes objects


@dataclass(frozen=True)
class RequestedOutput:
    """An output the client asked for, and whether as binary data."""

    name: str
    binary: bool
    classes: int = 0  # Triton's `classification`: the top classes a row


@dataclass(frozen=True)
class OipRequest:
    """An OIP inference request, decoded."""

    id: str | None
    inputs: list[Tensor]
    outputs: list[RequestedOutput]
    parameters: dict[str, Any] = field(default_factory=dict)

    @property
    def binary_by_default(self) -> bool:
        """`binary_data_output`: every output in binary unless its own says otherwise."""
        return bool(self.parameters.get("binary_data_output", False))


SEND_AS = (
    "send a JSON inference request with Content-Type: application/json, or binary tensors "
    "after a JSON header of Inference-Header-Content-Length bytes"
)


def decode_request(body: bytes, content_type: str) -> OipRequest:
    """Parse an inference request: the JSON header, then each input's values."""
    header_length = header_length_of(content_type)
    header_bytes = body if header_length is None else body[:header_length]
    what = "the inference request body" if header_length is None else "the request's JSON header"
    try:
        document = json_object(header_bytes, what, 'an inference request object: {"inputs": ...}')
    except BadRequestBody as error:
        raise BadRequestBody(f"{error}; {SEND_AS}") from None
    binary = memoryview(body)[len(header_bytes) :]
    inputs, offset = [], 0
    for index, spec in enumerate(_list_of_objects(document, "inputs", required=True)):
        tensor, used = _input(spec, index, binary[offset:])
        inputs.append(tensor)
        offset += used
    if offset != len(binary):
        raise BadRequestBody(
            f"the body has {len(binary) - offset} bytes of binary data that no input's "
            "binary_data_size accounts for"
        )
    return OipRequest(
        id=_optional_str(document, "id"),
        inputs=inputs,
        outputs=[_requested(spec, document) for spec in _list_of_objects(document, "outputs")],
        parameters=_triton_checked(_parameters(document)),
    )


def rows_of(request: OipRequest) -> np.ndarray:
    """The inputs as a 2-D float array: one input of rows, or several side by side as columns."""
    if len(request.inputs) == 1:
        rows = _numbers(request.inputs[0])
        rows = rows.reshape(1, -1) if rows.ndim == 1 else rows
    else:
        blocks = [_numbers(tensor) for tensor in request.inputs]
        blocks = [block.reshape(-1, 1) if block.ndim == 1 else block for block in blocks]
        if len({block.shape[0] for block in blocks}) != 1:
            shapes = ", ".join(f"{t.name} {list(t.values.shape)}" for t in request.inputs)
            raise BadRequestBody(f"inputs side by side need as many rows each: {shapes}")
        rows = np.hstack(blocks)
    if rows.size == 0:
        raise BadRequestBody("the inputs hold no values")
    return rows


def check_features(request: OipRequest, datatype: str) -> None:
    """Refuse flags, pixels and strings sent as features."""
    for tensor in request.inputs:
        if tensor.datatype in NOT_FEATURES and tensor.datatype != datatype:
            raise BadRequestBody(
                f"input {tensor.name} is {tensor.datatype} but this model takes {datatype}: "
                f"send it as {datatype} (other numbers convert)"
            )


def _numbers(tensor: Tensor) -> np.ndarray:
    if tensor.datatype == "BYTES":
        raise BadRequestBody(
            f"input {tensor.name} is BYTES; this model takes numbers (FP32, FP64, INT64, ...)"
        )
    if tensor.values.ndim not in (1, 2):
        raise BadRequestBody(
            f"input {tensor.name} has shape {list(tensor.values.shape)}; "
            "send [rows, features] or [features]"
        )
    return tensor.values.astype(np.float64)


def _input(spec: dict[str, Any], index: int, binary: memoryview) -> tuple[Tensor, int]:
    name = _required_str(spec, "name", f"inputs[{index}]")
    datatype = _datatype(spec, name)
    shape = _shape(spec, name)
    parameters = _parameters(spec)
    _check_in_request(parameters, f"input {name}")
    size = parameters.get("binary_data_size")
    if size is None:
        if "data" not in spec:
            raise BadRequestBody(f"input {name} has neither data nor binary_data_size")
        return Tensor(name, datatype, _from_json(spec["data"], datatype, shape, name)), 0
    if not isinstance(size, int) or isinstance(size, bool) or size < 0 or size > len(binary):
        raise BadRequestBody(
            f"input {name}: binary_data_size {size!r} is not a byte count within the "
            f"{len(binary)} bytes of binary data left"
        )
    return Tensor(name, datatype, _from_binary(bytes(binary[:size]), datatype, shape, name)), size


def _from_json(data: Any, datatype: str, shape: list[int], name: str) -> np.ndarray:
    if datatype == "BYTES":
        flat = [item.encode() if isinstance(item, str) else item for item in _flatten(data)]
        if not all(isinstance(item, bytes) for item in flat):
            raise BadRequestBody(f"input {name} is BYTES: its data must be strings")
        return _shaped(np.array(flat, dtype=object), shape, name)
    try:
        values = np.asarray(data, dtype=DTYPES[datatype])
    except (ValueError, TypeError, OverflowError) as exc:
        raise BadRequestBody(f"input {name}: data is not {datatype} values ({exc})") from None
    return _shaped(values.reshape(-1), shape, name)


def _from_binary(chunk: bytes, datatype: str, shape: list[int], name: str) -> np.ndarray:
    if datatype == "BYTES":
        return _shaped(np.array(_split_bytes(chunk, name), dtype=object), shape, name)
    dtype = DTYPES[datatype]
    if len(chunk) % dtype.itemsize:
        raise BadRequestBody(
            f"input {name}: {len(chunk)} bytes is not a whole number of {datatype} values"
        )
    return _shaped(np.frombuffer(chunk, dtype=dtype), shape, name)


def _split_bytes(chunk: bytes, name: str) -> list[bytes]:
    items, offset = [], 0
    while offset < len(chunk):
        if offset + _LENGTH.size > len(chunk):
            raise BadRequestBody(f"input {name}: BYTES data ends inside an element's length")
        (length,) = _LENGTH.unpack_from(chunk, offset)
        offset += _LENGTH.size
        if offset + length > len(chunk):
            raise BadRequestBody(f"input {name}: a BYTES element runs past the data sent")
        items.append(chunk[offset : offset + length])
        offset += length
    return items


def _shaped(flat: np.ndarray, shape: list[int], name: str) -> np.ndarray:
    expected = math.prod(shape)  # exact: numpy's product wraps past 64 bits
    if flat.size != expected:
        raise BadRequestBody(
            f"input {name}: shape {shape} holds {expected} values but {flat.size} were sent"
        )
    return flat.reshape(shape)


def _flatten(data: Any) -> list[Any]:
    if isinstance(data, list):
        return [item for part in data for item in _flatten(part)]
    return [data]


def _requested(spec: dict[str, Any], document: dict[str, Any]) -> RequestedOutput:
    name = _required_str(spec, "name", "outputs[]")
    default = bool(_parameters(document).get("binary_data_output", False))
    parameters = _parameters(spec)
    _check_in_request(parameters, f"output {name}")
    classes = parameters.get("classification", 0)
    if not isinstance(classes, int) or isinstance(classes, bool) or classes < 0:
        raise BadRequestBody(
            f"output {name}: parameters.classification {classes!r} is not a count of classes "
            "(1 or more)"
        )
    binary = parameters.get("binary_data", default)
    if not _is_flag(binary):
        raise BadRequestBody(f"output {name}: parameters.binary_data {binary!r} is not {FLAG}")
    return RequestedOutput(name, binary, classes)


def encode_response(
    model_name: str,
    model_version: str,
    request: OipRequest,
    outputs: list[Tensor],
) -> tuple[bytes, str]:
    """The response body and its media type."""
    header: dict[str, Any] = {
        "model_name": model_name,
        "model_version": model_version or OIP_VERSION,
    }
    if request.id is not None:
        header["id"] = request.id
    described, chunks = [], []
    for answered in outputs:
        asked = _asked(request, answered.name)
        tensor = _classified(answered, asked)
        record: dict[str, Any] = {
            "name": tensor.name,
            "datatype": tensor.datatype,
            "shape": list(tensor.values.shape),
        }
        if asked.binary:
            chunk = _to_binary(tensor)
            record["parameters"] = {"binary_data_size": len(chunk)}
            chunks.append(chunk)
        else:
            record["data"] = _to_json(tensor)
        described.append(record)
    header["outputs"] = described
    header_bytes = json.dumps(header).encode()
    if not chunks:
        return header_bytes, "application/json"
    return header_bytes + b"".join(chunks), oip_media_type(len(header_bytes))


def tensor_of(name: str, values: Any) -> Tensor:
    """Predictions as an output tensor, its datatype from what they hold."""
    array = np.asarray(values)
    if array.dtype.kind in "USO":
        items = [item if isinstance(item, bytes) else str(item).encode() for item in array.flat]
        return Tensor(name, "BYTES", np.array(items, dtype=object).reshape(array.shape))
    for datatype, dtype in DTYPES.items():
        if datatype != "BYTES" and dtype == array.dtype.newbyteorder("<"):
            return Tensor(name, datatype, array)
    raise BadRequestBody(f"output {name} of type {array.dtype} has no Open Inference datatype")


def datatype_of(dtype: Any) -> str:
    """The datatype of a numeric numpy type; FP64, as rows arrive, for one OIP lacks."""
    wanted = np.dtype(dtype).newbyteorder("<")
    named = (name for name, known in DTYPES.items() if name != "BYTES" and known == wanted)
    return next(named, "FP64")


def _asked(request: OipRequest, name: str) -> RequestedOutput:
    named = (output for output in request.outputs if output.name == name)
    return next(named, RequestedOutput(name, request.binary_by_default))


def _classified(tensor: Tensor, asked: RequestedOutput) -> Tensor:
    """Each row's top values as "value:index", the best first, as Triton answers."""
    if not asked.classes:
        return tensor
    if tensor.datatype == "BYTES":
        raise BadRequestBody(f"output {tensor.name} holds strings: it has no classes to rank")
    rows = tensor.values.reshape(len(tensor.values), -1)
    if asked.classes > rows.shape[1]:
        raise BadRequestBody(
            f"output {tensor.name} has {rows.shape[1]} classes a row; ask for a classification "
            f"of 1 to {rows.shape[1]}"
        )
    top = np.argsort(-rows.astype(np.float64), axis=1, kind="stable")[:, : asked.classes]
    values = np.take_along_axis(rows, top, axis=1)
    pairs = zip(values.flat, top.flat, strict=True)
    items = [f"{value}:{index}".encode() for value, index in pairs]
    return Tensor(tensor.name, "BYTES", np.array(items, dtype=object).reshape(top.shape))


def _to_json(tensor: Tensor) -> list[Any]:
    if tensor.datatype == "BYTES":
        return [item.decode("utf-8", "replace") for item in tensor.values.flat]
    return list(tensor.values.reshape(-1).tolist())


def _to_binary(tensor: Tensor) -> bytes:
    if tensor.datatype == "BYTES":
        return b"".join(_LENGTH.pack(len(item)) + item for item in tensor.values.flat)
    return np.ascontiguousarray(tensor.values, dtype=DTYPES[tensor.datatype]).tobytes()


def _list_of_objects(
    document: dict[str, Any], key: str, required: bool = False
) -> list[dict[str, Any]]:
    value = document.get(key)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise BadRequestBody(f"'{key}' must be a list of objects")
    if required and not value:
        raise BadRequestBody(f"'{key}' must name at least one tensor")
    return value


def _parameters(spec: dict[str, Any]) -> dict[str, Any]:
    parameters = spec.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise BadRequestBody("'parameters' must be an object")
    return parameters


def _triton_checked(parameters: dict[str, Any]) -> dict[str, Any]:
    """Refuse Triton's parameters in types Triton refuses."""
    for key, (is_of_type, kind) in TRITON_PARAMETERS.items():
        value = parameters.get(key)
        if value is not None and not is_of_type(value):
            raise BadRequestBody(f"parameters.{key} {value!r} is not {kind}, as Triton reads it")
    return parameters


def _check_in_request(parameters: dict[str, Any], tensor: str) -> None:
    region = parameters.get("shared_memory_region")
    if region is not None:
        raise BadRequestBody(
            f"{tensor} names shared memory region {echo(str(region))}, but shared memory is "
            "not served: send the values in the request (set_data_from_numpy) and read them "
            "in the answer"
        )


def _required_str(spec: dict[str, Any], key: str, where: str) -> str:
    value = spec.get(key)
    if not isinstance(value, str):
        raise BadRequestBody(f"{where} needs '{key}' as a string")
    return value


def _optional_str(spec: dict[str, Any], key: str) -> str | None:
    value = spec.get(key)
    if value is not None and not isinstance(value, str):
        raise BadRequestBody(f"'{key}' must be a string")
    return value


def _datatype(spec: dict[str, Any], name: str) -> str:
    datatype = spec.get("datatype")
    if datatype not in DTYPES:
        raise BadRequestBody(
            f"input {name}: datatype {datatype!r} is not one of {', '.join(DTYPES)}"
        )
    return str(datatype)


def _shape(spec: dict[str, Any], name: str) -> list[int]:
    shape = spec.get("shape")
    valid = isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    )
    if not valid:
        raise BadRequestBody(f"input {name}: shape must be a list of non-negative integers")
    return list(shape)  # type: ignore[arg-type]
