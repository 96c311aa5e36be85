"""Hot models spread over instances by themselves: from each instance's request rate and its
most requested models (`GET /sizing`), which models a router should send to more than one
instance, and to how many; written as the nginx map `deploy/nginx` includes.

A model whose requests are more than half an instance's fair share (the fleet's rate over its
instances) gets as many instances as keep each copy's share under that half, up to 4 (the map's
widest split) and the fleet's size. It gives one back only when each of the fewer copies would
carry under a quarter of a fair share: between the two, nothing changes, so a model near a
threshold does not flap.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SPREAD_ABOVE = 0.5  # a copy's rate, in fair shares, above which the model gets more copies
GATHER_BELOW = 0.25  # ...and under which, with one copy fewer, it gives one back
WIDEST = 4  # deploy/nginx splits a model 2, 3 or 4 ways
MAP_LINE = re.compile(r'^"(?P<model>(?:[^"\\]|\\.)*)"\s+\$modelhost_one_of_(?P<k>\d+);')
HEADER = (
    "# Written by `modelhost fleet hot-models` from the instances' own request rates: each line\n"
    "# spreads a hot model over k instances (deploy/nginx/modelhost.conf). Edits are overwritten.\n"
)


@dataclass(frozen=True)
class Poll:
    """What one instance's `GET /sizing` said at one time."""

    at: float  # seconds, the poller's clock
    requests: int  # served by a model, ever
    hot: Mapping[str, int]  # its most requested models, each one's requests since it became one


def rates(before: Sequence[Poll], after: Sequence[Poll]) -> tuple[dict[str, float], float]:
    """Each hot model's requests a second over the fleet, and the fleet's (instance by instance,
    `before` and `after` in the same order). A count that went down started again (the instance
    restarted, or the model became hot again): all of it is new."""
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
    """The copies each model should have (only models with more than one are listed)."""
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
    """The spread a map file holds (its comments and other lines are skipped)."""
    copies = {}
    for line in text.splitlines():
        if found := MAP_LINE.match(line.strip()):
            model = re.sub(r"\\(.)", r"\1", found["model"])
            copies[model] = int(found["k"])
    return copies


def _quoted(model: str) -> str:
    return model.replace("\\", "\\\\").replace('"', '\\"')
