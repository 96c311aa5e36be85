"""The policies' own rules: GDSF ranking and aging, the sketch, admission, minimum residency."""

from __future__ import annotations

import time
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.admission import FrequencySketch, no_more_frequent
from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import CostAwarePolicy, LRUPolicy, choose, policy_named

MiB = 2**20


@dataclass
class Model:
    name: str
    bytes: int = MiB
    last_used: float = 0.0
    hits: int = 1
    load_ms: float | None = 100.0


def test_cost_aware_evicts_cheapest_first() -> None:
    """Cost-aware evicts the cheapest to reload per byte first."""
    policy = CostAwarePolicy()
    dear = Model("dear", bytes=MiB, load_ms=500.0)
    cheap_and_big = Model("cheap", bytes=8 * MiB, load_ms=100.0)
    frequent = Model("frequent", bytes=8 * MiB, load_ms=100.0, hits=20)
    for model in (dear, cheap_and_big, frequent):
        policy.touched(model)
    assert choose(policy, [dear, cheap_and_big, frequent], MiB) == [cheap_and_big]


def ages_out_within(rounds: int, old_hits: int) -> bool:
    """Whether a model with `old_hits` hits long ago is chosen over a model used twice since,
    within `rounds` of newer models evicted one by one."""
    policy = CostAwarePolicy()
    old = Model("old", hits=old_hits)
    policy.touched(old)
    for round_number in range(rounds):
        newer = Model(f"new-{round_number}", hits=2)
        policy.touched(newer)
        if choose(policy, [old, newer], MiB) == [old]:
            return True
    return False


def test_cost_aware_ages_out_hot_models() -> None:
    """Cost-aware values age, so a once hot model goes in the end."""
    assert ages_out_within(10, old_hits=5), "the inflation clock never caught up with an old value"


def test_old_hits_age_out_in_bounded_time() -> None:
    # uncapped, it would take 500 rounds
    """A model hot long ago ages out in bounded time however many hits it had."""
    assert ages_out_within(40, old_hits=100_000), "a stale model with many hits stayed ahead"


def test_lru_ignores_touches_and_takes_the_oldest_first() -> None:
    a, b = Model("a", last_used=2.0), Model("b", last_used=1.0)
    assert choose(LRUPolicy(), [a, b], MiB) == [b]
    assert choose(LRUPolicy(), [a, b], 3 * MiB) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([f"m{i}" for i in range(30)]), max_size=200))
def test_the_sketch_never_underestimates_before_it_halves(names: list[str]) -> None:
    sketch = FrequencySketch(width=16, sample_size=10_000)  # narrow: collisions happen
    for name in names:
        sketch.record(name)
    for name in set(names):
        assert sketch.estimate(name) >= min(15, names.count(name))


def test_the_sketch_halves_every_sample() -> None:
    sketch = FrequencySketch(width=64, sample_size=10)
    for _ in range(9):
        sketch.record("a")
    assert sketch.estimate("a") == 9
    sketch.record("b")
    assert (sketch.estimate("a"), sketch.estimate("b")) == (4, 0)


def test_admission_evicts_only_less_frequent() -> None:
    """Admission lets a load evict only models no more frequent."""
    sketch = FrequencySketch()
    for name in ["hot"] * 5 + ["warm"] * 2 + ["cold"] + ["new"] * 2:
        sketch.record(name)
    candidates = [Model("hot"), Model("warm"), Model("cold")]
    rarer = no_more_frequent(sketch, "new")
    assert [c.name for c in candidates if rarer(c)] == ["warm", "cold"]


def test_minimum_residency_protects_young_models() -> None:
    """A model younger than the minimum residency is not a victim."""
    now = [0.0]
    memory = MemoryTier(
        MemoryBudget(100 * MiB, 0), policy_named("lru"), lambda: now[0], min_residency_s=5.0
    )
    memory.reserve("a", 100 * MiB)
    memory.mark_loaded("a", 1, 100 * MiB, 1.0)
    now[0] = 4.0
    assert memory.reserve("b", 10 * MiB) is None
    now[0] = 5.0
    assert [v.name for v in memory.reserve("b", 10 * MiB) or []] == ["a"]


def test_residency_uses_the_tier_clock() -> None:
    """`loaded_at` stays wall time and residency uses the tier clock."""
    memory = MemoryTier(MemoryBudget(100 * MiB, 0), clock=lambda: 42.0)
    memory.reserve("a", MiB)
    memory.mark_loaded("a", 1, MiB, 1.0)
    resident = memory.residents["a"]
    assert resident.loaded_at is not None and abs(resident.loaded_at - time.time()) < 60
    assert resident.loaded_at_s == 42.0


def test_a_sketch_counts_each_request_once() -> None:
    sketch = FrequencySketch()
    memory = MemoryTier(MemoryBudget(100 * MiB, 0), admission=sketch)
    memory.reserve("a", MiB)  # the miss
    memory.mark_loaded("a", 1, MiB, 1.0)
    for _ in range(3):  # the request that loaded it, then two hits
        memory.begin_request(memory.residents["a"])
        memory.end_request(memory.residents["a"])
    assert sketch.estimate("a") == 3
