"""The replay with loads that take time: what the server's header counts, and how it agrees with
the replay whose loads take none."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.policy import LRUPolicy
from modelhost.toolkit.simulate.loading import LoadSample, load_samples, replay_loading
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


def test_requests_during_a_load_join_it() -> None:
    """Requests during a load join it and loads wait for the loader."""
    trace = trace_of(
        [(0.0, "a"), (0.1, "a"), (0.2, "b"), (0.3, "b"), (1.05, "a"), (1.5, "b"), (2.5, "b")],
        load_s=1.0,
    )
    outcomes = replay_loading(trace, 2 * MiB, LRUPolicy(), loaders=1)
    # a loads 0-1 s; b waits for the loader, then loads 1-2 s
    assert (outcomes.hits, outcomes.joined, outcomes.loads) == (2, 3, 2)
    assert outcomes.hit_ratio == 2 / 7 and outcomes.no_load_ratio == 5 / 7


def test_load_evicts_when_a_loader_takes_it() -> None:
    """A load evicts when a loader takes it, not when it is asked for."""
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
def test_instant_loads_are_the_plain_replay(models: list[str], room: int) -> None:
    """With loads in no time it is the plain replay."""
    trace = trace_of([(float(i), name) for i, name in enumerate(models)], load_s=0.0)
    outcomes = replay_loading(trace, room * MiB, LRUPolicy(), loaders=2)
    assert outcomes.joined == 0
    assert outcomes.hits == replay(trace, room * MiB, LRUPolicy())


def test_load_gives_back_unkept_room() -> None:
    """A load takes the room it reserved and gives back what the model does not keep."""
    requests = [(0.0, "a"), (2.0, "b"), (4.0, "c"), (6.0, "a"), (8.0, "b")]
    trace = trace_of(requests, load_s=1.0)
    unpickling = {"c": [LoadSample(held_ms=1000.0, reserved_bytes=2 * MiB)]}
    outcomes = replay_loading(trace, 3 * MiB, LRUPolicy(), loaders=1, recorded=unpickling)
    # c's load needs 2 MiB beside a and b: a goes; c keeps 1 MiB, so a comes back beside b
    assert (outcomes.loads, outcomes.hits) == (4, 1)
    plain = replay_loading(trace, 3 * MiB, LRUPolicy(), loaders=1)
    assert (plain.loads, plain.hits) == (3, 2)


def test_loads_last_as_recorded() -> None:
    """Each load of a model lasts as its recorded loads did in turn."""
    requests = [(0.0, "a"), (2.0, "b"), (4.0, "a"), (6.0, "a"), (8.0, "a")]
    recorded = {"a": [LoadSample(1000.0, MiB), LoadSample(3000.0, MiB)]}
    outcomes = replay_loading(
        trace_of(requests, load_s=1.0), MiB, LRUPolicy(), loaders=1, recorded=recorded
    )
    # a's second load (4-7 s) is joined at 6 s and hit at 8 s
    assert (outcomes.loads, outcomes.joined, outcomes.hits) == (3, 1, 1)


def test_logged_loads_are_read_per_model() -> None:
    """The loads a server logged are read for its models' requests only."""

    def load(model: str, reason: str, **detail: float) -> dict[str, object]:
        return {"kind": "load", "model": model, "reason": reason, "detail": detail}

    events = [
        load("a", "invoked", loader_ms=30.0, reserved_bytes=2 * MiB),
        load("a", "scale_out", loader_ms=20.0, reserved_bytes=MiB),  # a copy: not in the replay
        {"kind": "evict", "model": "a", "reason": "lru"},
        load("b", "invoked"),  # an older server's: no loader_ms
        load("a", "invoked", loader_ms=25.0, reserved_bytes=MiB),
    ]
    assert load_samples(events) == {"a": [LoadSample(30.0, 2 * MiB), LoadSample(25.0, MiB)]}
