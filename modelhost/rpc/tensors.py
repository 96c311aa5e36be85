"""A ModelInferRequest as the OIP body the worker reads, and the reply as a ModelInferResponse.

Inputs travel as binary tensor data, so the frontend needs no numpy. The worker checks
datatypes and shapes, so errors read as REST clients get them.
"""

from __future__ import annotations

import array
import struct
import sys
from typing import Any

import msgspec

from modelhost.errors import BadRequestBody
from modelhost.workers.oip_media import header_length_of, is_oip

# datatype -> (its InferTensorContents field, its `array` type code)
TYPED: dict[str, tuple[str, str]] = {
    "BOOL": ("bool_contents", "B"),
    "INT8": ("int_contents", "b"),
    "INT16": ("int_contents", "h"),
    "INT32": ("int_contents", "i"),
    "INT64": ("int64_contents", "q"),
    "UINT8": ("uint_contents", "B"),
    "UINT16": ("uint_contents", "H"),
    "UINT32": ("uint_contents", "I"),
    "UINT64": ("uint64_contents", "Q"),
    "FP32": ("fp32_contents", "f"),
    "FP64": ("fp64_contents", "d"),
    "BYTES": ("bytes_contents", ""),
}
FIELDS = {field for field, _ in TYPED.values()}
RAW_ONLY = ("FP16",)  # no typed field holds them
_LENGTH = struct.Struct("<I")  # a BYTES element's length
_SWAP = sys.byteorder == "big"  # the wire is little-endian
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


def request_body(request: Any) -> tuple[bytes, int]:
    raw = request.raw_input_contents  # not copied: it is read once, by index
    if raw and len(raw) != len(request.inputs):
        raise BadRequestBody(
            f"raw_input_contents holds {len(raw)} tensors for {len(request.inputs)} inputs: "
            "send one for each input, in the inputs' order"
        )
    inputs, chunks = [], []
    for index, tensor in enumerate(request.inputs):
        spec, chunk = _input(tensor, raw[index] if raw else None)
        inputs.append(spec)
        chunks.append(chunk)
    header: dict[str, Any] = {"inputs": inputs, "parameters": _parameters(request.parameters)}
    header["parameters"]["binary_data_output"] = True
    if request.id:
        header["id"] = request.id
    if request.outputs:
        header["outputs"] = [_requested(output) for output in request.outputs]
    encoded = _encode(header)
    return encoded + b"".join(chunks), len(encoded)


def _input(tensor: Any, raw: bytes | None) -> tuple[dict[str, Any], bytes]:
    spec: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype}
    spec["shape"] = list(tensor.shape)
    parameters = _parameters(tensor.parameters)
    if raw is not None:
        if tensor.HasField("contents"):
            raise BadRequestBody(
                f"input {tensor.name} has contents and raw_input_contents: send one of them"
            )
        chunk = raw
    elif tensor.datatype in TYPED:
        chunk = _packed(tensor)
    elif tensor.datatype in RAW_ONLY:
        raise BadRequestBody(
            f"input {tensor.name} is {tensor.datatype}, which no typed contents field holds: "
            "send it in raw_input_contents"
        )
    else:  # the worker refuses it as REST's decoder does
        spec["data"] = []
        return {**spec, "parameters": parameters}, b""
    parameters["binary_data_size"] = len(chunk)
    return {**spec, "parameters": parameters}, chunk


def _packed(tensor: Any) -> bytes:
    field, code = TYPED[tensor.datatype]
    contents = tensor.contents
    for other in FIELDS - {field}:
        if len(getattr(contents, other)):
            raise BadRequestBody(
                f"input {tensor.name} is {tensor.datatype}: its values go in {field}, not {other}"
            )
    values = getattr(contents, field)
    if not code:
        return b"".join(_LENGTH.pack(len(item)) + item for item in values)
    try:
        packed = array.array(code, values)
    except OverflowError:
        raise BadRequestBody(
            f"input {tensor.name}: a value in {field} is out of {tensor.datatype}'s range"
        ) from None
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def _requested(output: Any) -> dict[str, Any]:
    parameters = _parameters(output.parameters)
    parameters["binary_data"] = True
    return {"name": output.name, "parameters": parameters}


def _parameters(parameters: Any) -> dict[str, Any]:
    if not parameters:  # most are empty, and upb is slow to walk even an empty map
        return {}
    return {
        key: getattr(value, value.WhichOneof("parameter_choice"))
        for key, value in parameters.items()
        if value.WhichOneof("parameter_choice")
    }


# ---------------------------------------------------------------------------- the reply


def fill_response(response: Any, body: bytes, content_type: str, raw: bool) -> None:
    """Fill a ModelInferResponse: raw outputs if `raw` or untyped (FP16), else typed."""
    length = header_length_of(content_type) if is_oip(content_type) else None
    header = _decode(body if length is None else body[:length])
    data = memoryview(body)[len(body) if length is None else length :]
    response.model_name = header.get("model_name", "")
    response.model_version = header.get("model_version", "")
    response.id = header.get("id", "")
    outputs = header.get("outputs") or []
    raw = raw or any(output.get("datatype") not in TYPED for output in outputs)
    offset = 0
    for spec in outputs:
        tensor = response.outputs.add(name=spec["name"], datatype=spec["datatype"])
        tensor.shape.extend(spec.get("shape", []))
        size = (spec.get("parameters") or {}).get("binary_data_size")
        if size is None:
            chunk = _from_json(spec.get("data", []), spec["datatype"])
        else:
            chunk, offset = bytes(data[offset : offset + size]), offset + size
        if raw:
            response.raw_output_contents.append(chunk)
        else:
            _unpack(tensor.contents, chunk, spec["datatype"])


def _unpack(contents: Any, chunk: bytes, datatype: str) -> None:
    field, code = TYPED[datatype]
    if not code:
        getattr(contents, field).extend(_split(chunk))
        return
    values = array.array(code)
    values.frombytes(chunk)
    if _SWAP:
        values.byteswap()
    getattr(contents, field).extend(values if datatype != "BOOL" else [v != 0 for v in values])


def _split(chunk: bytes) -> list[bytes]:
    items, offset = [], 0
    while offset < len(chunk):
        (length,) = _LENGTH.unpack_from(chunk, offset)
        items.append(chunk[offset + _LENGTH.size : offset + _LENGTH.size + length])
        offset += _LENGTH.size + length
    return items


def _from_json(values: list[Any], datatype: str) -> bytes:
    flat = _flatten(values)
    if datatype == "BYTES":
        items = [v.encode() if isinstance(v, str) else bytes(v) for v in flat]
        return b"".join(_LENGTH.pack(len(item)) + item for item in items)
    packed = array.array(TYPED[datatype][1] if datatype in TYPED else "d", flat)
    if _SWAP:
        packed.byteswap()
    return packed.tobytes()


def _flatten(values: Any) -> list[Any]:
    if isinstance(values, list):
        return [item for part in values for item in _flatten(part)]
    return [values]
