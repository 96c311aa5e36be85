"""The replay with loads that take time: what the server's header counts, and how it agrees with
the replay whose loads take none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.policy import LRUPolicy
from modelhost.toolkit.simulate.loading import replay_loading
from modelhost.toolkit.simulate.replay import replay
from modelhost.toolkit.simulate.trace import Trace

MiB = 2**20


def trace_of(requests: list[tuple[float, str]], load_s: float) -> Trace:
    names = {name for _, name in requests}
    return Trace(
        models=[name for _, name in requests],
        sizes=dict.fromkeys(names, MiB),
        reload_ms=dict.fromkeys(names, load_s * 1000),
        times=[time for time, _ in requests],
    )


def test_requests_during_a_load_join_it_and_loads_wait_for_the_loader() -> None:
    trace = trace_of(
        [(0.0, "a"), (0.1, "a"), (0.2, "b"), (0.3, "b"), (1.05, "a"), (1.5, "b"), (2.5, "b")],
        load_s=1.0,
    )
    outcomes = replay_loading(trace, 2 * MiB, LRUPolicy(), loaders=1)
    # a loads 0-1 s; b waits for the loader, then loads 1-2 s
    assert (outcomes.hits, outcomes.joined, outcomes.loads) == (2, 3, 2)
    assert outcomes.hit_ratio == 2 / 7 and outcomes.no_load_ratio == 5 / 7


def test_a_load_evicts_when_a_loader_takes_it_not_when_it_is_asked_for() -> None:
    requests = [(0.0, "a"), (0.2, "c"), (1.2, "d"), (1.5, "a")]
    trace = trace_of(requests, load_s=1.0)
    outcomes = replay_loading(trace, 2 * MiB, LRUPolicy(), loaders=1)
    assert outcomes.hits == 1  # d waits behind c until 2 s, so a is still there at 1.5 s
    assert replay(trace_of(requests, load_s=0.0), 2 * MiB, LRUPolicy()) == 0  # d evicted a


def test_a_model_larger_than_the_budget_is_refused() -> None:
    trace = trace_of([(0.0, "a"), (1.0, "a")], load_s=0.5)
    trace.sizes["a"] = 3 * MiB
    outcomes = replay_loading(trace, 2 * MiB, LRUPolicy(), loaders=2)
    assert (outcomes.refused, outcomes.loads) == (2, 0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=200), st.integers(1, 6))
def test_with_loads_in_no_time_it_is_the_plain_replay(models: list[str], room: int) -> None:
    trace = trace_of([(float(i), name) for i, name in enumerate(models)], load_s=0.0)
    outcomes = replay_loading(trace, room * MiB, LRUPolicy(), loaders=2)
    assert outcomes.joined == 0
    assert outcomes.hits == replay(trace, room * MiB, LRUPolicy())
