"""Per-model counters: invocations only, hits and misses by tier, errors, last latency parts."""

from __future__ import annotations

from modelhost.observe.exchange import Exchange
from modelhost.observe.usage import ModelUsage


def exchange(
    model: str = "m",
    cache: str | None = "hit",
    status: int = 200,
    error: str | None = None,
    invocation: bool = True,
) -> Exchange:
    timings = {"queue": 0.1, "load": 0.0, "infer": 1.0} if cache else {}
    return Exchange(0.0, "POST", "/r", status, 0.01, 1, 1, invocation, model, cache, timings, error)


def test_invocations_are_counted_per_model() -> None:
    usage = ModelUsage()
    usage.record(exchange(cache="disk"))
    usage.record(exchange())
    usage.record(exchange())
    usage.record(exchange(cache=None, status=507, error="InsufficientMemory"))
    assert usage.for_model("m") == {
        "requests": 4,
        "hits": 2,
        "misses": {"disk": 1},
        "errors": 1,
        "lastTimingsMs": {"queue": 0.1, "load": 0.0, "infer": 1.0},
    }


def test_other_calls_and_names_that_are_no_model_are_not_counted() -> None:
    usage = ModelUsage()
    usage.record(exchange(invocation=False))
    usage.record(exchange(model="nope", cache=None, status=404, error="ModelNotFound"))
    assert usage.for_model("m")["requests"] == 0
    assert usage.for_model("nope")["requests"] == 0


def test_beyond_the_cap_the_least_recently_counted_model_is_forgotten() -> None:
    usage = ModelUsage(max_models=2)
    for name in ("a", "b", "a", "c"):
        usage.record(exchange(model=name))
    assert [usage.for_model(n)["requests"] for n in ("a", "b", "c")] == [2, 0, 1]
