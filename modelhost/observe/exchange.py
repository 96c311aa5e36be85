"""One HTTP request and its response, as the metrics, counters and access log see it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Literal

# what a request came over: a closed set, so a label of its own costs two series at most
Protocol = Literal["rest", "grpc"]


@dataclass(slots=True)  # not frozen: a frozen init sets each field through object.__setattr__
class Exchange:
    time: float  # epoch seconds
    method: str
    route: str  # the route's template (bounded labels); "other" when none matched
    status: int
    duration_s: float
    bytes_in: int
    bytes_out: int
    invocation: bool = False
    model: str | None = None
    cache: str | None = None  # hit | disk | remote
    tier: str | None = None  # the tier that answered: device | host | disk | store
    timings_ms: dict[str, float] = field(default_factory=dict)  # Server-Timing parts
    error: str | None = None  # the error body's `type`
    tenant: str | None = None  # None: tenants are off
    protocol: Protocol = "rest"
    model_bytes: int | None = None  # a load's footprint, for `simulate`

    @property
    def load_wait_ms(self) -> float:
        return self.timings_ms.get("download", 0.0) + self.timings_ms.get("load", 0.0)


INVOCATION_PARTS = ("queue", "download", "load", "infer")  # what every invocation times
INVOCATION_TIMING = ", ".join(f"{part};dur=%.3f" for part in INVOCATION_PARTS)


def server_timing(timings_ms: Mapping[str, float]) -> str:
    """{"queue": 0.02} → `queue;dur=0.020`, the header `parse_server_timing` reads."""
    if tuple(timings_ms) == INVOCATION_PARTS:  # one format for the usual four
        return INVOCATION_TIMING % tuple(timings_ms.values())
    return ", ".join([f"{part};dur={ms:.3f}" for part, ms in timings_ms.items()])


def parse_server_timing(header: str) -> dict[str, float]:
    """`queue;dur=0.020, load;dur=4.1` → {"queue": 0.02, "load": 4.1}."""
    parts = {}
    for entry in header.split(","):
        name, *params = (piece.strip() for piece in entry.split(";"))
        for param in params:
            key, _, value = param.partition("=")
            if name and key == "dur":
                try:
                    parts[name] = float(value)
                except ValueError:
                    continue
    return parts


def error_reason(status: int, error_type: str | None) -> str:
    """The JSON error's type, else the status's phrase."""
    if error_type:
        return error_type
    try:
        return HTTPStatus(status).phrase.replace(" ", "").replace("-", "")
    except ValueError:
        return f"HTTP{status}"
