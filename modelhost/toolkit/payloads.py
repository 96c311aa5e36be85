"""Request bodies for `bench`: a JSON-lines file, a folder of files, or arrays.

A JSON line is SageMaker's `{"Body": ..., "ContentType": ...}`, `"TargetModel"` making it one
model's, or a raw JSON body. A pickle runs code as it loads: give only your own.
"""

from __future__ import annotations

import io
import json
import mimetypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JSON = "application/json"
NPY = "application/x-npy"
CONTENT_TYPES = {".npy": NPY, ".json": JSON, ".csv": "text/csv", ".jsonl": "application/jsonlines"}


@dataclass(frozen=True)
class Payload:
    body: bytes
    content_type: str = JSON
    model: str = ""  # the only model it goes to; empty: any


def read_payloads(path: Path) -> list[Payload]:
    """The bodies in `path`: a folder, a .npy or .npz, or JSON lines."""
    path = Path(path)
    if path.is_dir():
        return folder_payloads(path)
    if path.suffix == ".npy":
        return [Payload(path.read_bytes(), NPY)]
    if path.suffix == ".npz":
        return array_payloads(path)
    if path.suffix in (".pkl", ".pickle"):
        return pickled_payloads(path)
    return json_line_payloads(path)


def content_type_of(path: Path) -> str:
    guessed = mimetypes.guess_type(path.name)[0]
    return CONTENT_TYPES.get(path.suffix.lower()) or guessed or "application/octet-stream"


def folder_payloads(folder: Path) -> list[Payload]:
    """Every file in `folder`, not hidden ones, by name."""
    files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    if not files:
        raise ValueError(f"{folder} holds no files to send as payloads")
    return [Payload(p.read_bytes(), content_type_of(p)) for p in files]


def array_payloads(path: Path) -> list[Payload]:
    """Each array of a .npz file as its own .npy body, loading no pickles."""
    import numpy as np

    with np.load(path, allow_pickle=False) as arrays:
        bodies = [npy_payload(arrays[name]) for name in arrays.files]
    if not bodies:
        raise ValueError(f"{path} holds no arrays")
    return bodies


def pickled_payloads(path: Path) -> list[Payload]:
    import pickle

    import numpy as np

    with open(path, "rb") as file:
        value = pickle.load(file)  # noqa: S301  (the user's own file, named on the command line)
    arrays = list(value) if isinstance(value, (list, tuple)) else [value]
    if not arrays or not all(isinstance(a, np.ndarray) for a in arrays):
        raise ValueError(f"{path} must hold an array or a list of arrays (numpy)")
    return [npy_payload(array) for array in arrays]


def npy_payload(array: Any) -> Payload:
    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return Payload(buffer.getvalue(), NPY)


def json_line_payloads(path: Path) -> list[Payload]:
    """Every non-blank line of `path`; a bad line is an error naming its number."""
    payloads = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON value ({exc})") from None
            try:
                payloads.append(payload_of(value))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: {exc}") from None
    if not payloads:
        raise ValueError(f"{path} holds no payloads: write one JSON value per line")
    return payloads


def payload_of(value: object) -> Payload:
    if isinstance(value, dict) and "TargetModel" in value and "Body" not in value:
        raise ValueError('a line naming its TargetModel needs its "Body"')
    if isinstance(value, dict) and "Body" in value:
        body, content_type = value["Body"], str(value.get("ContentType") or JSON)
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return Payload(raw, content_type, str(value.get("TargetModel") or ""))
    return Payload(json.dumps(value).encode(), JSON)


def models_named(payloads: Sequence[Payload]) -> list[str]:
    """The models the payloads name, in their order."""
    return list(dict.fromkeys(payload.model for payload in payloads if payload.model))


def payloads_by_model(
    models: Sequence[str], payloads: Sequence[Payload]
) -> dict[str, tuple[Payload, ...]]:
    """Each model's own payloads, else those naming no model."""
    named: dict[str, list[Payload]] = {}
    for payload in payloads:
        named.setdefault(payload.model, []).append(payload)
    shared = named.get("", [])
    chosen = {model: tuple(named.get(model, shared)) for model in models}
    lacking = [model for model, sent in chosen.items() if not sent]
    if lacking:
        raise ValueError(
            f"{lacking[0]} has no payload: give it a line with its TargetModel, or a line "
            f"naming no model ({len(lacking)} models lack one)"
        )
    return chosen
