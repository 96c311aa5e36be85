"""The live miss-ratio curve: exact while it tracks every name, close to exact when it samples
(the hottest names' reuses too), bounded in memory at a million names, following the traffic of
its window, and the same whether uses come one at a time or in a list."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.curve import (
    BINS_PER_DOUBLING,
    COLD,
    EDGES,
    MissRatioCurve,
    Windows,
    bin_of,
)
from modelhost.toolkit.simulate import lru
from modelhost.toolkit.simulate.trace import make_trace

KiB = 1024


def zipf_requests(names: int, count: int, seed: int = 0) -> list[str]:
    weights = 1 / np.arange(1, names + 1)
    rng = np.random.default_rng(seed)
    picks = rng.choice(names, size=count, p=weights / weights.sum())
    return [f"tenant-{i}" for i in picks]


def size_of(name: str) -> int:
    return (100 + int(name.rsplit("-", 1)[1]) % 7 * 50) * KiB


def replay(curve: MissRatioCurve, requests: list[str]) -> None:
    for i, name in enumerate(requests):
        curve.record(name, size_of(name), now=i * 0.001)


def exact_hit_ratios(requests: list[str], budgets: list[float]) -> list[float]:
    trace = make_trace(requests, {n: size_of(n) for n in set(requests)})
    return lru.hit_ratios(lru.stack_distances(trace), [int(b) for b in budgets])


def test_full_tracking_matches_simulate() -> None:
    """Tracking every name gives `simulate`'s curve at every bin edge."""
    requests = zipf_requests(500, 20_000)
    curve = MissRatioCurve(now=0.0, max_names=1000)
    replay(curve, requests)
    assert curve.rate == 1.0
    edges, shares = zip(*curve.windows.curve("day").points(), strict=True)
    # the window's decay weighs the 20 s of requests within 0.03% of each other
    assert list(shares) == pytest.approx(exact_hit_ratios(requests, list(edges)), abs=0.002)


def test_a_one_percent_sample_estimates_the_curve() -> None:
    """A 1% sample of the names estimates the curve of all within 2 points, at the smallest
    budgets (room for the hottest few models) as well as the largest."""
    requests = zipf_requests(100_000, 300_000, seed=3)
    curve = MissRatioCurve(now=0.0, max_names=500)
    replay(curve, requests)
    assert curve.rate < 0.015
    budgets = [2.0**k * KiB for k in range(8, 24)]
    day = curve.windows.curve("day")
    estimated = [day.hit_ratio_at(b) for b in budgets]
    assert estimated == pytest.approx(exact_hit_ratios(requests, budgets), abs=0.02)


def test_a_hot_names_reuse_counts_the_unsampled_names_between() -> None:
    """One model in every 5 requests and a new name in each of the others, all 100 KiB: each
    reuse of the hot model needs the room of 5. The sample, soon under 1% of the new names,
    mostly holds none of the 4 between two uses, yet the reuses land where they belong."""
    curve = MissRatioCurve(now=0.0, max_names=100)
    for i in range(50_000):
        name = "hot" if i % 5 == 0 else f"new-{i}"
        curve.record(name, 100 * KiB, now=i * 0.001)
    assert curve.rate < 0.01 and "hot" in curve.frequent.names
    bins = curve.windows.curve("day").bins
    # all but the few reuses while the sample was still most of the names
    assert bins[bin_of(500 * KiB)] / sum(bins) > 0.999


def test_a_million_names_keep_the_sample_within_its_bound() -> None:
    curve = MissRatioCurve(now=0.0, max_names=1000)
    for i in range(1_000_000):
        curve.record(f"name-{i}", 100 * KiB, now=i * 1e-4)
    assert len(curve.distances) <= 1000
    assert len(curve._highest) <= 1000
    assert curve.distances.positions <= 2 * 1000
    assert 1000 / 1_000_000 / 2 < curve.rate < 2 * 1000 / 1_000_000


def test_the_hour_window_follows_the_traffic_the_day_remembers() -> None:
    """Three hours of a working set of 40 models, then one hour of 4: the last hour's curve
    reaches its hits in the room of 4 models, the day's still needs more."""
    curve = MissRatioCurve(now=0.0)
    wide = [f"tenant-{i % 40}" for i in range(3 * 3600)]
    narrow = [f"tenant-{i % 4}" for i in range(3600)]
    for i, name in enumerate(wide + narrow):
        curve.record(name, 100 * KiB, now=float(i * 1))
    room_of_four = 4 * 100 * KiB * 1.1
    assert curve.windows.curve("hour").hit_ratio_at(room_of_four) > 0.6
    assert curve.windows.curve("day").hit_ratio_at(room_of_four) < 0.35


def test_room_for_and_hit_ratio_agree() -> None:
    """`room_for` and `hit_ratio_at` read the same curve."""
    windows = Windows(now=0.0)
    rng = random.Random(0)
    for _ in range(5000):
        windows.add(rng.randrange(8 * BINS_PER_DOUBLING, 30 * BINS_PER_DOUBLING), 1.0, 0.0)
    windows.add(COLD, 500.0, 0.0)  # first uses: no room gives more than 10/11 of hits
    histogram = windows.curve("hour")
    for target in (0.1, 0.5, 0.9):
        assert histogram.hit_ratio_at(histogram.room_for(target)) == pytest.approx(target)
    assert histogram.room_for(0.95) == float("inf")
    assert histogram.hit_ratio_at(EDGES[-1]) == pytest.approx(5000 / 5500)


@st.composite
def runs(draw: st.DrawFn) -> list[tuple[str, int]]:
    """Uses in runs of one name, from one of two sets of names: the other set's names cool."""
    names = draw(st.sampled_from(["aab", "cde"]))
    picked = st.tuples(st.sampled_from(names), st.integers(1, 2), st.integers(1, 6))
    return [
        (name, size)
        for name, size, times in draw(st.lists(picked, max_size=40))
        for _ in range(times)
    ]


@settings(max_examples=100, deadline=None)
@given(
    batches=st.lists(runs(), max_size=6),
    max_names=st.sampled_from([2, 100]),
    steps=st.lists(st.sampled_from([0.0, 0.0, 0.4, 1.3]), min_size=1),
)
def test_recording_uses_together_curves_as_each_in_turn(
    batches: list[list[tuple[str, int]]], max_names: int, steps: list[float]
) -> None:
    """A frequent name's uses in a row add together; every histogram ends as when each use is
    recorded in turn, names sampled or not, frequent or cooled, across the windows' growth
    steps."""
    together, each = MissRatioCurve(0.0, max_names), MissRatioCurve(0.0, max_names)
    times = itertools.accumulate(itertools.cycle(steps))
    for index, uses in enumerate(batches):
        start = 40.0 * index  # names cool
        timed = [(name, KiB * size, start + next(times)) for name, size in uses]
        together.record_all(timed)
        for name, size, now in timed:
            each.record(name, size, now)
    assert together.windows.histograms == each.windows.histograms
    assert together.frequent.served == each.frequent.served
    assert (together.rest, together.threshold) == (each.rest, each.threshold)


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.sampled_from([0.0, 0.0, 0.3, 1.0, 2.5]), max_size=60))
def test_uses_added_together_histogram_as_each_in_turn(steps: list[float]) -> None:
    """Hits held and counted at once (host/sizing.py) weigh as when counted one at a time,
    across the windows' growth steps, to the last bit."""
    times = list(itertools.accumulate(steps, initial=0.5))
    together, each = Windows(0.0, bins=1), Windows(0.0, bins=1)
    together.add_all(0, 1.0, times)
    for now in times:
        each.add(0, 1.0, now)
    assert together.histograms == each.histograms
    assert (together.growth, together.growth_until) == (each.growth, each.growth_until)
