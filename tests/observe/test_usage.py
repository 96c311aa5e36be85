"""Per-model counters: invocations only, hits and misses by tier, errors, last latency parts."""

from __future__ import annotations

import tracemalloc
from collections import Counter, OrderedDict
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.observe.exchange import Exchange
from modelhost.observe.hits import Hits
from modelhost.observe.usage import ENTRY_BYTES, MAX_MODELS, ModelUsage, fits
from modelhost.records.held import FOLD_AFTER


def exchange(
    model: str = "m",
    cache: str | None = "hit",
    status: int = 200,
    error: str | None = None,
    invocation: bool = True,
) -> Exchange:
    timings = {"queue": 0.1, "load": 0.0, "infer": 1.0} if cache else {}
    return Exchange(
        time=0.0,
        method="POST",
        route="/r",
        status=status,
        duration_s=0.01,
        bytes_in=1,
        bytes_out=1,
        invocation=invocation,
        model=model,
        cache=cache,
        timings_ms=timings,
        error=error,
    )


def test_invocations_are_counted_per_model() -> None:
    usage = ModelUsage()
    usage.record(exchange(cache="disk"))
    usage.record(exchange())
    usage.record(exchange())
    usage.record(exchange(cache=None, status=507, error="InsufficientMemory"))
    counted = usage.for_model("m")
    totals = {"succeeded": 30.0, "failed": 10.0, "queue": 0.3, "infer": 3.0}  # of 3 successes
    assert counted.pop("totalMs") == pytest.approx(totals)
    assert counted == {
        "requests": 4,
        "hits": 2,
        "misses": {"disk": 1},
        "errors": 1,
        "lastTimingsMs": {"queue": 0.1, "load": 0.0, "infer": 1.0},
    }


def test_a_fronts_hits_add_to_the_totals() -> None:
    """A front's hits carry their durations and infer parts, but no queue part."""
    usage = ModelUsage()
    models = ["a", "b", "a"]
    hits = Hits(
        ["/r"] * 3, models, [0.0] * 3, [0.002, 0.004, 0.003], [0.5, 0.7, 0.9], [1] * 3, [1] * 3
    )
    assert usage.takes(set(models))
    usage.record_hits(hits)
    counted = usage.for_model("a")
    assert counted["requests"] == counted["hits"] == 2
    assert counted["lastTimingsMs"]["infer"] == 0.9
    totals = {"succeeded": 5.0, "failed": 0.0, "queue": 0.0, "infer": 1.4}
    assert counted["totalMs"] == pytest.approx(totals)


def test_only_model_calls_are_counted() -> None:
    """Other calls and names that are no model are not counted."""
    usage = ModelUsage()
    usage.record(exchange(invocation=False))
    usage.record(exchange(model="nope", cache=None, status=404, error="ModelNotFound"))
    assert usage.for_model("m")["requests"] == 0
    assert usage.for_model("nope")["requests"] == 0


def test_cap_forgets_least_recently_counted() -> None:
    """Beyond the cap the least recently counted model is forgotten."""
    usage = ModelUsage(max_models=2)
    for name in ("a", "b", "a", "c"):
        usage.record(exchange(model=name))
    assert [usage.for_model(n)["requests"] for n in ("a", "b", "c")] == [2, 0, 1]


def test_counters_of_100000_models_stay_under_their_byte_cap() -> None:
    """Ever new names keep the most recently counted `MAX_MODELS`, each in a few bytes."""
    usage = ModelUsage()
    parts = ["".join(part) for part in (("que", "ue"), ("lo", "ad"), ("inf", "er"))]
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100_000):
            timings = dict.fromkeys(parts, 1.5)  # parsed from each response's header, unshared
            model = f"t{i}/m"
            usage.record(
                Exchange(
                    time=0.0,
                    method="POST",
                    route="/r",
                    status=200,
                    duration_s=0.01,
                    bytes_in=1,
                    bytes_out=1,
                    invocation=True,
                    model=model,
                    cache="disk",
                    timings_ms=timings,
                )
            )
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= MAX_MODELS * ENTRY_BYTES
    assert usage.for_model("t99999/m")["misses"] == {"disk": 1}
    assert usage.for_model("t0/m")["requests"] == 0


def test_counters_read_back_as_counted() -> None:
    usage = ModelUsage()
    for cache in ("remote", "disk", "hit", "hit"):
        usage.record(exchange(cache=cache))
    usage.record(exchange(cache="hit", status=500, error="HandlerError"))
    counted = usage.for_model("m")
    assert counted["requests"] == 5 and counted["hits"] == 3 and counted["errors"] == 1
    assert counted["misses"] == {"remote": 1, "disk": 1}


def test_each_model_keeps_its_counts_as_requests_alternate() -> None:
    """Counts read back alike whichever model was counted last."""
    usage = ModelUsage()
    for name, cache in (("a", "hit"), ("b", "disk"), ("a", "remote"), ("a", "hit"), ("b", "hit")):
        usage.record(exchange(model=name, cache=cache))
        assert usage.for_model("a")["requests"] + usage.for_model("b")["requests"] > 0
    assert usage.for_model("a")["misses"] == {"remote": 1} and usage.for_model("a")["hits"] == 2
    assert usage.for_model("b")["misses"] == {"disk": 1} and usage.for_model("b")["hits"] == 1


def test_a_cap_of_none_counts_nothing() -> None:
    usage = ModelUsage(max_models=0)
    usage.record(exchange())
    usage.record(exchange())
    assert usage.for_model("m")["requests"] == 0


COUNTED = st.lists(
    st.builds(
        exchange,
        model=st.sampled_from(["a", "b", "c"]),
        cache=st.sampled_from(["hit", "disk", "remote", None]),
        status=st.sampled_from([200, 404, 500, 507]),
        error=st.sampled_from([None, "ModelNotFound", "InvalidModelName", "HandlerError"]),
        invocation=st.booleans(),
    ),
    max_size=FOLD_AFTER * 2,
)


@given(COUNTED, st.floats(0, 1e6, allow_nan=False), st.sampled_from([1, 2, MAX_MODELS]))
def test_exchanges_counted_together_read_as_each_counted_in_turn(
    exchanges: list[Exchange], start: float, cap: int
) -> None:
    """Exchanges are counted a model at a time; each model's counts, last timings and totals
    read as counting each exchange in turn, under the cap, gives them."""
    exchanges = [  # each its own timings, to tell which was last
        replace(each, timings_ms=each.timings_ms and {"infer": start + place})
        for place, each in enumerate(exchanges)
    ]
    usage, expected = ModelUsage(max_models=cap), OrderedDict[str, Counter[str]]()
    for each in exchanges:
        usage.record(each)
        if each.invocation and each.error not in ("ModelNotFound", "InvalidModelName"):
            counts = expected.pop(each.model, Counter())
            expected[each.model] = counts  # the most recently counted last
            if len(expected) > cap:
                expected.popitem(last=False)
            counts["requests"] += 1
            counts["errors"] += each.status >= 400
            counts[each.cache] += each.cache is not None
            if each.timings_ms:
                counts["last"] = each.timings_ms["infer"]
            outcome = "succeeded" if each.status < 400 else "failed"
            counts[outcome] += each.duration_s * 1000
            counts["infer"] += each.timings_ms.get("infer", 0.0) if outcome == "succeeded" else 0
    for model in ("a", "b", "c"):
        counts = expected.get(model, Counter())
        read = usage.for_model(model)
        assert read["requests"] == counts["requests"] and read["errors"] == counts["errors"]
        assert read["hits"] == counts["hit"]
        assert read["misses"] == {tier: counts[tier] for tier in ("disk", "remote") if counts[tier]}
        assert read["lastTimingsMs"] == ({"infer": counts["last"]} if "last" in counts else {})
        totals = {"succeeded": counts["succeeded"], "failed": counts["failed"], "queue": 0.0}
        assert read["totalMs"] == pytest.approx({**totals, "infer": counts["infer"]})


@pytest.mark.parametrize(
    ("keys", "held", "cap", "taken"),
    [
        ({"a", "b"}, {"a": 1}, 2, True),  # one new key, one free place
        ({"b", "c"}, {"a": 1}, 2, False),  # two new keys would forget "a"
        ({"a"}, {"a": 1, "b": 2}, 2, True),  # held already: at the cap, nothing forgotten
        ({"c"}, {"a": 1, "b": 2}, 2, False),
        (set(), {}, 0, True),
    ],
)
def test_fits_counts_only_the_keys_not_held(
    keys: set[str], held: dict[str, int], cap: int, taken: bool
) -> None:
    assert fits(keys, held, cap) is taken
