"""Request bodies for `bench`, read from a JSON-lines file.

A line is either SageMaker's form, `{"Body": ..., "ContentType": "text/csv"}` (Body a string, or
any JSON value that is sent as JSON), or a raw body: any other JSON value, sent as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

JSON = "application/json"


@dataclass(frozen=True)
class Payload:
    body: bytes
    content_type: str = JSON


def read_payloads(path: Path) -> list[Payload]:
    """Every non-blank line of `path` as a Payload; a bad line is an error naming its number."""
    payloads = []
    for number, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if line.strip():
            try:
                payloads.append(payload_of(json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{path}:{number}: not a JSON value ({exc})") from None
    if not payloads:
        raise ValueError(f"{path} holds no payloads: write one JSON value per line")
    return payloads


def payload_of(value: object) -> Payload:
    if isinstance(value, dict) and "Body" in value:
        body, content_type = value["Body"], str(value.get("ContentType") or JSON)
        raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        return Payload(raw, content_type)
    return Payload(json.dumps(value).encode(), JSON)
