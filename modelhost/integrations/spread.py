"""Hot models spread over instances, written as an nginx map.

A model's copies follow its share of the fleet's requests: one more for each half of an
instance's fair share it carries. Copies are given back only under a quarter, so a model does not
flap, and a model too slow to matter stays on one instance whatever its share.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

SPREAD_ABOVE = 0.5  # fair shares: the fleet's rate per instance
GATHER_BELOW = 0.25
MIN_RPS = 1.0  # slower models stay on one instance
WIDEST = 4  # deploy/nginx's widest split
MAP_LINE = re.compile(r'^"(?P<model>(?:[^"\\]|\\.)*)"\s+\$modelhost_one_of_(?P<k>\d+);')
HEADER = (
    "# Written by `modelhost fleet hot-models` from the instances' own request rates: each line\n"
    "# spreads a hot model over k instances (deploy/nginx/modelhost.conf). Edits are overwritten.\n"
)


@dataclass(frozen=True)
class Poll:
    """What one instance's `GET /sizing` said."""

    at: float  # the poller's clock
    requests: int
    hot: Mapping[str, int]  # requests since each became hot
    among: Mapping[str, int] = field(default_factory=dict)  # the instance's own, since then

    @classmethod
    def from_sizing(cls, at: float, sizing: Mapping[str, Any]) -> Poll:
        """Read from `GET /sizing`'s JSON."""
        listed = sizing.get("hotModels", [])
        hot = {model["model"]: int(model["requests"]) for model in listed}
        among = {m["model"]: int(m["instanceRequests"]) for m in listed if "instanceRequests" in m}
        return cls(at, int(sizing.get("requests", 0)), hot, among)


class Rates(NamedTuple):
    """Requests a second over the fleet, from the instances that answered both polls."""

    models: dict[str, float]
    total_rps: float
    instances: int


def rates(before: Sequence[Poll | None], after: Sequence[Poll | None]) -> Rates:
    """Each instance's rates over its own interval; a count that fell started again."""
    models: dict[str, float] = {}
    total, answered = 0.0, 0
    for old, new in zip(before, after, strict=True):
        if old is None or new is None:
            continue
        elapsed = max(1e-9, new.at - old.at)
        requests = _since(old.requests, new.requests)
        total, answered = total + requests / elapsed, answered + 1
        for model in new.hot:
            share = _share(old, new, model, requests)
            models[model] = models.get(model, 0.0) + share * requests / elapsed
    return Rates(models, total, answered)


def _share(old: Poll, new: Poll, model: str, requests: int) -> float:
    """The model's share of the instance's `requests` since the last poll.

    Its count's growth while it stayed hot, else its share since it became hot, judged over the
    whole interval: its count may span hours before it was listed. From an instance that does
    not say since when, a model counts from its second listing.
    """
    count, among = new.hot[model], new.among.get(model)
    stayed = model in old.hot and count >= old.hot[model]
    if stayed and (among is None or among >= requests):
        return (count - old.hot[model]) / max(1, requests)
    return count / max(among, requests) if among else 0.0


def _since(before: int, after: int) -> int:
    return after - before if after >= before else after


def spread(
    observed: Rates, fleet_size: int, now: Mapping[str, int], min_rps: float = MIN_RPS
) -> dict[str, int]:
    """Only models with more than one copy."""
    fair = observed.total_rps / max(1, observed.instances)
    widest = min(WIDEST, fleet_size)
    wanted: dict[str, int] = {}
    for model in set(observed.models) | set(now):
        rate, copies = observed.models.get(model, 0.0), now.get(model, 1)
        more = math.ceil(rate / (SPREAD_ABOVE * fair)) if fair and rate >= min_rps else 1
        fewer = math.ceil(rate / (GATHER_BELOW * fair)) if fair else 1
        copies = more if more > copies else min(copies, fewer)
        if (copies := max(1, min(widest, copies))) > 1:
            wanted[model] = copies
    return wanted


def render(copies: Mapping[str, int]) -> str:
    lines = [f'"{_quoted(model)}" $modelhost_one_of_{k};' for model, k in sorted(copies.items())]
    return HEADER + "".join(line + "\n" for line in lines)


def parse(text: str) -> dict[str, int]:
    copies = {}
    for line in text.splitlines():
        if found := MAP_LINE.match(line.strip()):
            model = re.sub(r"\\(.)", r"\1", found["model"])
            copies[model] = int(found["k"])
    return copies


def _quoted(model: str) -> str:
    return model.replace("\\", "\\\\").replace('"', '\\"')
