"""simulate's LRU curve equals a brute-force LRU at every budget, the server's own LRUPolicy
replayed agrees with it, and the optimum bounds every policy (Hypothesis on random traces)."""

from __future__ import annotations

from collections import OrderedDict

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.policy import CostAwarePolicy, LRUPolicy
from modelhost.toolkit.simulate import lru
from modelhost.toolkit.simulate.replay import belady, optimum, replay
from modelhost.toolkit.simulate.run import needed_text, simulate_summary
from modelhost.toolkit.simulate.trace import Trace, make_trace


def brute_force_lru(trace: Trace, budget: int) -> int:
    cache: OrderedDict[str, int] = OrderedDict()
    hits = 0
    for model in trace.models:
        if model in cache:
            hits += 1
            cache.move_to_end(model)
            continue
        cache[model] = trace.sizes[model]
        while sum(cache.values()) > budget:
            cache.popitem(last=False)
    return hits


@st.composite
def traces(draw: st.DrawFn, equal_sizes: bool = False) -> tuple[Trace, list[int]]:
    names = [f"m{i}" for i in range(draw(st.integers(1, 8)))]
    models = draw(st.lists(st.sampled_from(names), min_size=1, max_size=60))
    size = st.just(4) if equal_sizes else st.integers(1, 20)
    sizes = {name: draw(size) for name in names}
    trace = make_trace(models, sizes)
    largest = max(trace.sizes.values())
    budgets = draw(
        st.lists(st.integers(largest, largest + trace.distinct_bytes), min_size=1, max_size=6)
    )
    return trace, budgets


@settings(max_examples=200, deadline=None)
@given(traces())
def test_lru_curve_equals_brute_force(
    case: tuple[Trace, list[int]],
) -> None:
    """The one-pass LRU curve equals brute force at every budget."""
    trace, budgets = case
    ratios = lru.hit_ratios(lru.stack_distances(trace), budgets)
    for budget, ratio in zip(budgets, ratios, strict=True):
        assert round(ratio * len(trace.models)) == brute_force_lru(trace, budget)  # a float ratio
        assert replay(trace, budget, LRUPolicy()) == brute_force_lru(trace, budget)


@settings(max_examples=100, deadline=None)
@given(traces())
def test_the_optimum_bounds_every_policy(case: tuple[Trace, list[int]]) -> None:
    trace, budgets = case
    for budget in budgets:
        best = optimum(trace, budget)
        assert best + 1e-6 >= brute_force_lru(trace, budget)
        assert best + 1e-6 >= replay(trace, budget, CostAwarePolicy())


@settings(max_examples=150, deadline=None)
@given(traces(equal_sizes=True))
def test_with_equal_sizes_belady_is_the_linear_optimum(case: tuple[Trace, list[int]]) -> None:
    from modelhost.toolkit.simulate.replay import _relaxed_optimum

    trace, budgets = case
    for budget in (b - b % 4 for b in budgets):  # whole slots: otherwise the relaxation splits one
        assert abs(belady(trace.models, budget // 4) - _relaxed_optimum(trace, budget)) < 1e-6
        assert belady(trace.models, budget // 4) >= brute_force_lru(trace, budget)


def test_budget_for_target_is_the_least() -> None:
    """The budget for a target is the least that reaches it."""
    trace = make_trace(list("abcabcabcd"), {"a": 10, "b": 20, "c": 30, "d": 5})
    distances = lru.stack_distances(trace)
    needed = lru.budget_for(distances, 0.6)
    assert brute_force_lru(trace, int(needed)) / 10 >= 0.6
    assert brute_force_lru(trace, int(needed) - 1) / 10 < 0.6


def test_a_budget_read_off_the_grid_says_at_most() -> None:
    """Only LRU's budget is exact: another policy's is the least replayed budget that reaches the
    target, so its line says "at most" rather than passing a grid point off as the need."""
    trace = make_trace(list("abcabcabcd"), {"a": 10, "b": 20, "c": 30, "d": 5})
    lines = needed_text(simulate_summary(trace, [2**20], 0.6))
    exact = [line for line in lines if line.startswith("lru:")]
    assert exact and "at most" not in exact[0]
    assert all("at most 1.0 MiB for" in line for line in lines if line not in exact)


def test_a_target_no_budget_reaches_says_the_ceiling_and_what_to_ask() -> None:
    """Half of these requests are first requests: no budget of any policy gives 90%, and "not
    reached" alone left a user raising --budgets for nothing."""
    trace = make_trace(list("abcdabcd"), {m: 10 for m in "abcd"})
    lines = needed_text(simulate_summary(trace, [10, 20], 0.9, with_optimum=False))
    assert lines and all("0.5" in line and "--target" in line for line in lines)
    assert "first requests" in lines[0]


def test_a_target_past_the_replayed_budgets_asks_for_larger_ones() -> None:
    trace = make_trace(list("abababab"), {"a": 10, "b": 10})
    lines = needed_text(simulate_summary(trace, [10], 0.7, with_optimum=False))
    other = next(line for line in lines if line.startswith("cost-aware:"))
    assert "10 B" in other and "--budgets" in other  # the largest replayed, and the way on
