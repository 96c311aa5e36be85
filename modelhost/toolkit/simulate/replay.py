"""Replays of a trace at one budget: through any eviction policy with the server's protocol
(`choose(candidates, need_bytes)`), and the optimum that bounds them all.

The optimum with objects of different sizes is NP-hard, so the bound is the linear relaxation of
it (as in Berger et al., "Practical Bounds on Optimal Caching with Variable Object Sizes", 2018):
each interval between two uses of a model may be kept a fraction f in [0, 1] of the way, costing
f × size bytes during the interval; maximise the kept fractions (hits) with the bytes at every
moment within the budget. Any real policy is one 0/1 choice of those fractions, so the bound is
never below it. When all models have one size the relaxation is exact and equals Belady's
farthest-next-use, which is what is computed then.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import numpy as np

from modelhost.toolkit.simulate.trace import Trace


@dataclass
class Entry:
    """A model in the simulated memory tier: what the server's Resident shows a policy."""

    model: str
    bytes: int
    last_used: float
    load_ms: float
    hits: int = 0


def replay(trace: Trace, budget_bytes: int, policy: Any) -> int:
    """Hits of `policy` over the trace. A model larger than the budget is never loaded (the
    server answers 507 and evicts nothing)."""
    resident: dict[str, Entry] = {}
    used = hits = 0
    for clock, model in enumerate(trace.models):
        entry = resident.get(model)
        if entry is not None:
            hits += 1
            entry.hits, entry.last_used = entry.hits + 1, float(clock)
            continue
        size = trace.sizes[model]
        if size > budget_bytes:
            continue
        if used + size > budget_bytes:
            victims = policy.choose(list(resident.values()), used + size - budget_bytes)
            for victim in victims or []:
                used -= resident.pop(victim.model).bytes
        resident[model] = Entry(model, size, float(clock), trace.reload_ms[model], 1)
        used += size
    return hits


def next_uses(models: list[str]) -> list[int]:
    """For each request, the position of the next request for its model (len(models) if none)."""
    following = [len(models)] * len(models)
    seen: dict[str, int] = {}
    for position in range(len(models) - 1, -1, -1):
        following[position] = seen.get(models[position], len(models))
        seen[models[position]] = position
    return following


def belady(models: list[str], slots: int) -> int:
    """Hits of farthest-next-use with room for `slots` equal-sized models, a request's own model
    included among the candidates (it may be left out): the optimum."""
    if slots <= 0:
        return 0
    following = next_uses(models)
    cached: dict[str, int] = {}  # model → its next use
    heap: list[tuple[int, str]] = []  # (-next use, model); entries whose next use moved are stale
    hits = 0
    for position, model in enumerate(models):
        if model in cached:
            hits += 1
        elif len(cached) >= slots:
            farthest = _farthest(cached, heap)
            if farthest[0] <= following[position]:
                continue  # this model's next use is the farthest: leave it out
            del cached[farthest[1]]
            heapq.heappop(heap)
        cached[model] = following[position]
        heapq.heappush(heap, (-following[position], model))
    return hits


def _farthest(cached: dict[str, int], heap: list[tuple[int, str]]) -> tuple[int, str]:
    """The cached model used farthest ahead, as (its next use, model), left on top of the heap."""
    while cached.get(heap[0][1]) != -heap[0][0]:
        heapq.heappop(heap)
    return -heap[0][0], heap[0][1]


def optimum(trace: Trace, budget_bytes: int) -> float:
    """The most hits any policy can have at this budget (a bound; exact for equal sizes)."""
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
        for gap in range(start, following[start]):  # the gaps after requests start .. next-1
            rows.append(gap)
            cols.append(column)
            values.append(size / budget_bytes)  # in budgets: keeps the solver's numbers near 1
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
