"""The distinct bytes a run of requests holds, from the reuse times seen: exact for simple
patterns, and the average over every run of a real trace."""

from __future__ import annotations

import math

import numpy as np
import pytest

from modelhost.cache.distinct import DistinctBytes


def test_first_uses_are_all_distinct() -> None:
    """Names never seen again: a run of n requests holds n of them, at their mean size."""
    distinct = DistinctBytes()
    for size in (100, 300) * 10:
        distinct.add(size, math.inf)
    assert distinct.expected_in(5) == 5 * 200
    assert distinct.mean_size == 200


def test_a_cycle_holds_its_names_once() -> None:
    """Names used in turn, 4 of them: a run holds as many as it has requests, up to 4."""
    distinct = DistinctBytes()
    for _ in range(100):
        distinct.add(100, 4)
    assert [distinct.expected_in(n) for n in (0, 1, 3, 4, 10, 1000)] == [0, 100, 300, 400, 400, 400]


def test_nothing_seen_expects_nothing() -> None:
    assert DistinctBytes().expected_in(10) == 0.0


def test_the_estimate_is_every_runs_average() -> None:
    """On a Zipf trace, fed each request's reuse time, the estimate for runs of n requests is
    the average of the distinct bytes over every run of n requests in the trace."""
    rng = np.random.default_rng(0)
    weights = 1 / np.arange(1, 2001)
    names = rng.choice(2000, size=20_000, p=weights / weights.sum()).tolist()
    size = [100 + name % 7 * 50 for name in range(2000)]
    distinct = DistinctBytes(halve_after=math.inf)
    last: dict[int, int] = {}
    for at, name in enumerate(names):
        distinct.add(size[name], at - last[name] if name in last else math.inf)
        last[name] = at
    for n in (1, 10, 100, 1000):
        runs = [names[start : start + n] for start in range(0, len(names) - n, 7)]
        average = np.mean([sum(size[name] for name in set(run)) for run in runs])
        assert distinct.expected_in(n) == pytest.approx(average, rel=0.02)


def test_older_uses_fade() -> None:
    """After the traffic changes, the estimate follows the new reuse times."""
    distinct = DistinctBytes(halve_after=100)
    for _ in range(1000):
        distinct.add(100, 2)
    for _ in range(1000):
        distinct.add(100, 50)
    assert distinct.expected_in(100) == pytest.approx(100 * 50, rel=1e-3)
