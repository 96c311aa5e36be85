"""Hot models spread over instances, written as an nginx map.

Copies are added above half a fair share and given back under a quarter, so a model does not
flap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SPREAD_ABOVE = 0.5  # fair shares: the fleet's rate per instance
GATHER_BELOW = 0.25
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

    @classmethod
    def from_sizing(cls, at: float, sizing: Mapping[str, Any]) -> Poll:
        """Read from `GET /sizing`'s JSON."""
        hot = {model["model"]: int(model["requests"]) for model in sizing.get("hotModels", [])}
        return cls(at, int(sizing.get("requests", 0)), hot)


def rates(before: Sequence[Poll], after: Sequence[Poll]) -> tuple[dict[str, float], float]:
    """Rates over the fleet; a count that fell started again."""
    models: dict[str, float] = {}
    total = 0.0
    for old, new in zip(before, after, strict=True):
        elapsed = max(1e-9, new.at - old.at)
        total += _since(old.requests, new.requests) / elapsed
        for model, count in new.hot.items():
            served = _since(old.hot.get(model, 0), count)
            models[model] = models.get(model, 0.0) + served / elapsed
    return models, total


def _since(before: int, after: int) -> int:
    return after - before if after >= before else after


def spread(
    model_rates: Mapping[str, float], total: float, instances: int, now: Mapping[str, int]
) -> dict[str, int]:
    """Only models with more than one copy."""
    fair = total / max(1, instances)
    widest = min(WIDEST, instances)
    wanted: dict[str, int] = {}
    for model in set(model_rates) | set(now):
        rate, copies = model_rates.get(model, 0.0), now.get(model, 1)
        more = math.ceil(rate / (SPREAD_ABOVE * fair)) if fair else 1
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
