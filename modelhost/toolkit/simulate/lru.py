"""LRU at every budget in one pass, by the byte stack distances the server's live curve uses."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from modelhost.cache.reuse import StackDistances
from modelhost.toolkit.simulate.trace import Trace


def stack_distances(trace: Trace) -> list[float]:
    """Per request, the smallest budget at which LRU hits it (infinity for a first use)."""
    distances = StackDistances()
    return [distances.use(model, trace.sizes[model]) for model in trace.models]


def hit_ratios(distances: Sequence[float], budgets: Sequence[int]) -> list[float]:
    ordered = np.sort(np.asarray(distances, dtype=float))
    hits = np.searchsorted(ordered, np.asarray(budgets, dtype=float), side="right")
    return [float(h) / len(distances) if len(distances) else 0.0 for h in hits]


def budget_for(distances: Sequence[float], target_hit_ratio: float) -> float:
    """The smallest budget at which LRU reaches the target, else infinity."""
    needed = math.ceil(target_hit_ratio * len(distances))
    if needed == 0:
        return 0.0
    ordered = sorted(distances)
    return ordered[needed - 1] if needed <= len(ordered) else math.inf
