"""Request bodies to feature rows, predictions to reply bodies, in the worker."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import msgspec
import numpy as np

from modelhost.errors import BadRequestBody, NestedTooDeep, NotAcceptable, UnsupportedMediaType

JSON = "application/json"
CSV = "text/csv"
NPY = "application/x-npy"
NPY_MAGIC = b"\x93NUMPY"  # what every .npy file starts with
SUPPORTED_TYPES = (JSON, CSV, NPY)

_EXPECTED_JSON = (
    'expected JSON: a row [5.1, 3.5], a list of rows [[5.1, 3.5], ...], {"instances": ...} '
    'or {"inputs": ...}'
)
_EXPECTED_CSV = "expected CSV: one row of numbers per line, comma-separated, no header"
_PREVIEW_CHARS = 60


def to_builtin(value: Any) -> Any:
    """The JSON encoders' fallback for numpy scalars and arrays."""
    if isinstance(value, (np.generic, np.ndarray)):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


# msgspec, not json: far cheaper (docs/decisions.md, "What one request costs")
_JSON_DECODER = msgspec.json.Decoder()
_JSON_ENCODER = msgspec.json.Encoder(enc_hook=to_builtin)


def media_type(header: str) -> str:
    """The bare media type of a Content-Type or Accept entry, lower case."""
    return header.split(";", 1)[0].strip().lower()


def decode_rows(body: bytes, content_type: str) -> np.ndarray:
    """Decode a request body into a 2-D float array of feature rows."""
    kind = media_type(content_type or "")
    if kind in ("", "*/*", JSON):
        return _decode_json(body)
    if kind == CSV:
        return _decode_csv(body)
    if kind == NPY:
        return _decode_npy(body)
    raise UnsupportedMediaType(
        f"cannot decode Content-Type '{content_type}'; send one of {', '.join(SUPPORTED_TYPES)}"
        + not_a_form(kind)
    )


def not_a_form(kind: str) -> str:
    """Why a form-typed body reached a codec: the frontend found it was no form."""
    if kind != "application/x-www-form-urlencoded":
        return ""
    return (
        " (curl -d types any body so, and this one is no form: add -H 'Content-Type: "
        "application/json', or send a form field data=...)"
    )


def encode_predictions(values: np.ndarray | list[Any], accept: str) -> tuple[bytes, str]:
    """Encode predictions for the client's Accept header; return (body, content type)."""
    kind = negotiate(accept)
    if kind == CSV:
        return _encode_csv(values), CSV
    if kind == NPY:
        return _encode_npy(values), NPY
    return _JSON_ENCODER.encode({"predictions": values}), JSON


def encode_value(value: Any) -> tuple[bytes, str]:
    """Encode what user code returned: bytes as-is, str as text, else JSON."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value), "application/octet-stream"
    if isinstance(value, str):
        return value.encode(), "text/plain; charset=utf-8"
    return json.dumps(value, default=to_builtin).encode(), JSON


def negotiate(accept: str) -> str:
    """The first supported media type in an Accept header."""
    entries = [media_type(entry) for entry in (accept or "").split(",")]
    for kind in entries:
        if kind in ("", "*/*", "application/*"):
            return JSON
        if kind == "text/*":
            return CSV
        if kind in SUPPORTED_TYPES:
            return kind
    raise NotAcceptable(
        f"cannot answer with Accept '{accept}'; ask for one of {', '.join(SUPPORTED_TYPES)}"
    )


def _decode_json(body: bytes) -> np.ndarray:
    try:
        value = _JSON_DECODER.decode(body)
    except msgspec.DecodeError:
        value = _decode_lenient_json(body)
    except RecursionError:
        raise NestedTooDeep from None
    if isinstance(value, dict):
        value = _unwrap(value)
    if not isinstance(value, list):
        raise BadRequestBody(f"{_EXPECTED_JSON}; got {_preview(body)}")
    return _to_matrix(value, _EXPECTED_JSON)


def _decode_lenient_json(body: bytes) -> Any:
    """What strict JSON refuses and clients write: NaN, Infinity, a byte-order mark, UTF-16."""
    try:
        return json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequestBody(f"body is not valid JSON ({exc}); {_EXPECTED_JSON}") from exc
    except RecursionError:
        raise NestedTooDeep from None


def _unwrap(document: dict[str, Any]) -> Any:
    for key in ("instances", "inputs"):
        if key in document:
            return document[key]
    keys = ", ".join(repr(key) for key in list(document)[:5])
    raise BadRequestBody(f"{_EXPECTED_JSON}; got an object with keys {keys}")


def _decode_csv(body: bytes) -> np.ndarray:
    try:
        text = body.decode("utf-8-sig")  # Excel writes a byte-order mark
    except UnicodeDecodeError as exc:
        raise BadRequestBody(f"CSV body is not UTF-8 ({exc}); {_EXPECTED_CSV}") from exc
    rows = [line.split(",") for line in text.splitlines() if line.strip()]
    return _to_matrix(rows, _EXPECTED_CSV)


def _decode_npy(body: bytes) -> np.ndarray:
    if not body.startswith(NPY_MAGIC):  # np.load would try it as a pickle, or an .npz
        raise BadRequestBody(
            f"body is not a .npy file: it starts with {body[: len(NPY_MAGIC)]!r}, not "
            f"{NPY_MAGIC!r}; send one array as numpy.save writes it"
        )
    try:
        array = np.lib.format.read_array(io.BytesIO(body), allow_pickle=False)  # pickles run code
    except (ValueError, OSError, EOFError) as exc:
        raise BadRequestBody(f"body is not a readable .npy file: {exc}") from exc
    return _to_matrix(array, "expected a 1-D or 2-D numeric .npy array")


def _to_matrix(rows: Any, expected: str) -> np.ndarray:
    """Rows (or one row) as a 2-D float64 array."""
    try:
        matrix = np.asarray(rows, dtype=np.float64)  # null becomes NaN, a missing value
    except (ValueError, TypeError) as exc:
        raise BadRequestBody(f"{_diagnose(rows)}; {expected}") from exc
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    if matrix.ndim != 2:
        raise BadRequestBody(f"got {matrix.ndim}-dimensional data, not rows of numbers; {expected}")
    if matrix.size == 0:
        raise BadRequestBody(f"no rows or no values in the body; {expected}")
    return matrix


def _diagnose(rows: Any) -> str:
    """Say which row or value made the rows not a numeric matrix."""
    if not (isinstance(rows, list) and rows and all(isinstance(row, list) for row in rows)):
        return f"not a row of numbers or a list of rows: {_preview(rows)}"
    width = len(rows[0])
    for index, row in enumerate(rows):
        if len(row) != width:
            return f"row {index} has {len(row)} values but row 0 has {width}; rows must match"
        for column, item in enumerate(row):
            if not _is_number(item):
                return f"row {index}, column {column}: {_preview(item)} is not a number"
    return f"values are not all numbers: {_preview(rows)}"


def _is_number(item: Any) -> bool:
    try:
        float(item)
    except (TypeError, ValueError):
        return item is None  # a missing value
    return True


def _encode_csv(values: np.ndarray | list[Any]) -> bytes:
    rows = values.tolist() if isinstance(values, np.ndarray) else values
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for row in rows:
        writer.writerow([_builtin(item) for item in _as_row(row)])
    return buffer.getvalue().encode()


def _as_row(prediction: Any) -> list[Any] | tuple[Any, ...] | np.ndarray:
    """A prediction as a CSV row: a vector stays whole, a label is one cell."""
    return prediction if isinstance(prediction, (list, tuple, np.ndarray)) else [prediction]


def _encode_npy(values: np.ndarray | list[Any]) -> bytes:
    array = np.asarray(values)
    if array.dtype == object:  # string labels, say
        array = np.asarray(array.tolist())
    buffer = io.BytesIO()
    try:
        np.save(buffer, array, allow_pickle=False)
    except ValueError as exc:
        message = f"these predictions cannot be sent as .npy ({exc}); ask for {JSON}"
        raise BadRequestBody(message) from exc
    return buffer.getvalue()


def _builtin(item: Any) -> Any:
    return item.item() if isinstance(item, np.generic) else item


def _preview(value: Any) -> str:
    if isinstance(value, bytes):
        text = value.decode("utf-8", "replace")
    else:
        text = json.dumps(value, default=repr)
    return text if len(text) <= _PREVIEW_CHARS else text[:_PREVIEW_CHARS] + "..."
