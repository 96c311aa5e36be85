"""LRU at every budget in one pass, by stack distances in bytes.

Under LRU with objects of different sizes the cache always holds the longest prefix of the recency
stack that fits the budget (a miss puts the object on top and evicts from the bottom until it
fits; a hit only reorders inside the prefix). So a request hits at budget B exactly when its
object's byte stack distance, its own size plus the sizes of the distinct objects used since its
last use, is at most B. One Fenwick tree over request positions, holding each object's size at
its latest use, gives every distance in O(n log n).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from modelhost.toolkit.simulate.trace import Trace


class _Fenwick:
    def __init__(self, n: int) -> None:
        self.tree = [0] * (n + 1)

    def add(self, index: int, delta: int) -> None:
        index += 1
        while index < len(self.tree):
            self.tree[index] += delta
            index += index & -index

    def prefix(self, index: int) -> int:
        """Sum of positions [0, index)."""
        total = 0
        while index > 0:
            total += self.tree[index]
            index -= index & -index
        return total


def stack_distances(trace: Trace) -> list[float]:
    """Per request, the smallest budget at which LRU hits it (infinity for a first use)."""
    tree = _Fenwick(len(trace.models))
    last: dict[str, int] = {}
    distances: list[float] = []
    for position, model in enumerate(trace.models):
        size = trace.sizes[model]
        previous = last.get(model)
        if previous is None:
            distances.append(math.inf)
        else:
            between = tree.prefix(position) - tree.prefix(previous + 1)
            distances.append(float(size + between))
            tree.add(previous, -size)
        tree.add(position, size)
        last[model] = position
    return distances


def hit_ratios(distances: Sequence[float], budgets: Sequence[int]) -> list[float]:
    """LRU's hit ratio at each budget."""
    ordered = np.sort(np.asarray(distances, dtype=float))
    hits = np.searchsorted(ordered, np.asarray(budgets, dtype=float), side="right")
    return [float(h) / len(distances) if len(distances) else 0.0 for h in hits]


def budget_for(distances: Sequence[float], target_hit_ratio: float) -> float:
    """The smallest budget at which LRU reaches the target; infinity when no budget does."""
    needed = math.ceil(target_hit_ratio * len(distances))
    if needed == 0:
        return 0.0
    ordered = sorted(distances)
    return ordered[needed - 1] if needed <= len(ordered) else math.inf
