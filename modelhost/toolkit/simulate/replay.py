"""Replays of a trace at one budget through the server's memory tier, and the optimum.

The optimum with sizes is NP-hard, so the bound is its linear relaxation (Berger et al., 2018):
each interval between two uses of a model is kept a fraction f of the way, at f × size bytes.
Every real policy is a 0/1 choice, so none beats it. With equal sizes it is Belady's.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryBudget, MemoryTier, Resident
from modelhost.cache.policy import EvictionPolicy
from modelhost.toolkit.simulate.trace import Trace


def replay(
    trace: Trace,
    budget_bytes: int,
    policy: EvictionPolicy,
    admission: FrequencySketch | None = None,
    min_residency_s: float = 0.0,
) -> int:
    """Hits of `policy` over the trace, through the server's own `MemoryTier`.

    A load the tier refuses is a miss that leaves the cache as it was, as the server's 507 does.
    """
    now = [0.0]
    tier = replay_tier(budget_bytes, policy, lambda: now[0], admission, min_residency_s)
    hits = 0
    for position, model in enumerate(trace.models):
        now[0] = trace.times[position] if trace.times else float(position)
        hits += serve(tier, model, trace.sizes[model], trace.reload_ms[model])
    return hits


def replay_tier(
    budget_bytes: int,
    policy: EvictionPolicy,
    clock: Callable[[], float],
    admission: FrequencySketch | None = None,
    min_residency_s: float = 0.0,
) -> MemoryTier:
    """The server's memory tier with the whole budget for models and the trace's clock."""
    budget = MemoryBudget(budget_bytes, 0)
    return MemoryTier(budget, policy, clock, admission=admission, min_residency_s=min_residency_s)


def serve(tier: MemoryTier, model: str, size_bytes: int, load_ms: float) -> bool:
    """One request as the server's host serves it; True for a hit."""
    resident = tier.get(model)
    hit = resident is not None
    if resident is None:
        resident = _load(tier, model, size_bytes, load_ms)
        if resident is None:
            return False
    tier.begin_request(resident)
    tier.end_request(resident)
    return hit


def _load(tier: MemoryTier, model: str, size_bytes: int, load_ms: float) -> Resident | None:
    if not tier.fits_ever(size_bytes):
        return None
    victims = tier.reserve(model, size_bytes)
    if victims is None:
        return None
    for victim in victims:
        tier.remove(victim.name)
    tier.mark_loaded(model, 0, size_bytes, load_ms)
    return tier.residents[model]


def next_uses(models: list[str]) -> list[int]:
    """For each request, the position of the next request for its model."""
    following = [len(models)] * len(models)
    seen: dict[str, int] = {}
    for position in range(len(models) - 1, -1, -1):
        following[position] = seen.get(models[position], len(models))
        seen[models[position]] = position
    return following


def belady(models: list[str], slots: int) -> int:
    """Hits of farthest-next-use with room for `slots` equal-sized models: the optimum."""
    if slots <= 0:
        return 0
    following = next_uses(models)
    cached: dict[str, int] = {}  # model → its next use
    heap: list[tuple[int, str]] = []  # (-next use, model); stale once its next use moves
    hits = 0
    for position, model in enumerate(models):
        if model in cached:
            hits += 1
        elif len(cached) >= slots:
            farthest = _farthest(cached, heap)
            if farthest[0] <= following[position]:
                continue  # its own next use is the farthest: leave it out
            del cached[farthest[1]]
            heapq.heappop(heap)
        cached[model] = following[position]
        heapq.heappush(heap, (-following[position], model))
    return hits


def _farthest(cached: dict[str, int], heap: list[tuple[int, str]]) -> tuple[int, str]:
    """The cached model used farthest ahead, left on top of the heap."""
    while cached.get(heap[0][1]) != -heap[0][0]:
        heapq.heappop(heap)
    return -heap[0][0], heap[0][1]


def optimum(trace: Trace, budget_bytes: int) -> float:
    """The most hits any policy can have at this budget."""
    sizes = set(trace.sizes.values())
    if len(sizes) == 1:
        return float(belady(trace.models, budget_bytes // sizes.pop()))
    return _relaxed_optimum(trace, budget_bytes)


def _relaxed_optimum(trace: Trace, budget_bytes: int) -> float:
    from scipy.optimize import linprog
    from scipy.sparse import csr_matrix

    following = next_uses(trace.models)
    starts = [p for p, nxt in enumerate(following) if nxt < len(trace.models)]
    if not starts:
        return 0.0
    rows, cols, values = [], [], []
    for column, start in enumerate(starts):
        size = trace.size_of(start)
        for gap in range(start, following[start]):
            rows.append(gap)
            cols.append(column)
            values.append(size / budget_bytes)  # keeps the solver's numbers near 1
    bytes_held = csr_matrix((values, (rows, cols)), shape=(len(trace.models), len(starts)))
    result = linprog(
        -np.ones(len(starts)),
        A_ub=bytes_held,
        b_ub=np.ones(len(trace.models)),
        bounds=(0.0, 1.0),
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"the optimum's linear program did not solve: {result.message}")
    return float(-result.fun)
