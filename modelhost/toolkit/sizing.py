"""The instances a server's `GET /sizing` says its models' memory needs, for `cost --sizing`."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import httpx


class MemoryInstances(NamedTuple):
    hit_ratio: float
    needed: float  # instancesNeeded: room for that hit ratio, in instances of the server's size
    instances: int  # rounded up: the fewest instances the fleet may have


def sizing_answer(source: str) -> dict[str, Any]:
    """A server's answer (its URL) or one saved as a file."""
    if not source.startswith(("http://", "https://")):
        try:
            answer: dict[str, Any] = json.loads(Path(source).read_text())
        except (OSError, ValueError) as error:
            raise ValueError(
                f"--sizing {source}: cannot read a GET /sizing answer: {error}"
            ) from None
        return answer
    url = source.rstrip("/")
    url = url if url.endswith("/sizing") else f"{url}/sizing"
    try:
        response = httpx.get(url, timeout=30)
        response.raise_for_status()
    except httpx.HTTPError as error:
        raise ValueError(f"--sizing {source}: GET {url} failed: {error}{_way_out(error)}") from None
    read: dict[str, Any] = response.json()
    return read


def memory_instances(sources: Sequence[str], hit_ratio: float) -> MemoryInstances:
    """The sum of each answer's instancesNeeded at `hit_ratio`, as a hashed fleet needs."""
    needed = sum(instances_needed(source, hit_ratio) for source in sources)
    return MemoryInstances(hit_ratio, round(needed, 3), max(1, math.ceil(needed)))


def instances_needed(source: str, hit_ratio: float) -> float:
    """One answer's instancesNeeded at `hit_ratio`; refused where it has none."""
    by_ratio = sizing_answer(source).get("instancesNeeded")
    if not isinstance(by_ratio, dict):
        raise ValueError(f"--sizing {source} has no instancesNeeded: give a modelhost URL")
    needed = by_ratio.get(f"{hit_ratio:g}")
    if needed is None:
        known = ", ".join(ratio for ratio, value in by_ratio.items() if value is not None)
        raise ValueError(
            f"--sizing {source} gives no instancesNeeded for a {hit_ratio:g} hit ratio (no "
            f"request yet, or no budget reaches it); it gives {known or 'none'}: choose "
            "--hit-ratio among them"
        )
    return float(needed)


def _way_out(error: httpx.HTTPError) -> str:
    """For a server that wants a key (TorchServe's token authorization)."""
    if not isinstance(error, httpx.HTTPStatusError) or error.response.status_code != 401:
        return ""
    return (
        "; save the answer with its key first, curl -H 'Authorization: Bearer <inference key>' "
        f"{error.request.url} > sizing.json, and give --sizing sizing.json"
    )
