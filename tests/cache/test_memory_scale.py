"""The memory tier at many residents: a load with room, placement and the totals read no other
resident, an eviction weighs only the models it walks, the running totals always equal a full
count (a reading of exactly the models' bytes leaves a settled baseline where it was), and the
policy's order, kept lazily, is always a sort of the loaded models."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryBudget, MemoryTier, Resident, State
from modelhost.cache.policy import CostAwarePolicy, LRUPolicy
from modelhost.scheduler.placement import least_loaded
from modelhost.testing import StepClock

KiB = 2**10
RESIDENTS = 10_000


class CountingResidents(dict[str, Resident]):
    """A tier's residents that count each one a scan reads."""

    read = 0

    def values(self) -> Any:
        return self._counted(super().values())

    def items(self) -> Any:
        return self._counted(super().items())

    def _counted(self, found: Any) -> Iterator[Any]:
        for each in found:
            self.read += 1
            yield each


def filled(memory: MemoryTier, used: bool = False) -> MemoryTier:
    """RESIDENTS models of 1 KiB loaded, m0 first, on two workers; each used once if `used`."""
    for i in range(RESIDENTS):
        assert memory.reserve(f"m{i}", KiB) == []
        memory.mark_loaded(f"m{i}", i % 2, KiB, 1.0)
        if used:
            memory.begin_request(memory.residents[f"m{i}"])
            memory.end_request(memory.residents[f"m{i}"])
    return memory


def crowded_tier() -> tuple[MemoryTier, CountingResidents]:
    """In a budget with room for as many more."""
    memory = filled(MemoryTier(MemoryBudget(4 * RESIDENTS * KiB, 0), LRUPolicy(), StepClock()))
    counting = CountingResidents(memory.residents)
    memory.ledger.residents = counting
    return memory, counting


def test_a_load_with_room_to_spare_reads_no_other_resident() -> None:
    memory, counting = crowded_tier()
    assert memory.reserve("new", KiB) == []
    memory.mark_loaded("new", 0, KiB, 1.0)
    assert memory.committed_bytes == (RESIDENTS + 1) * KiB
    assert counting.read == 0


def test_placement_reads_no_resident() -> None:
    memory, counting = crowded_tier()
    memory.reserve("new", 3 * KiB)
    memory.mark_loaded("new", 0, 3 * KiB, 1.0)
    workers = [Worker(0), Worker(1)]
    assert least_loaded(workers, memory).worker_id == 1  # 3 KiB less
    assert counting.read == 0


def test_idle_unloads_read_only_the_idle_models() -> None:
    """The upkeep's idle unloads walk from the least recently used to the first used since."""
    memory, counting = crowded_tier()
    for name in ("m0", "m1", "m2"):
        memory.begin_request(memory.residents[name])  # still in flight: not a victim
    memory.end_request(memory.residents["m0"])
    memory.clock.now += 100_000  # type: ignore[attr-defined]
    for i in range(10, RESIDENTS):
        memory.begin_request(memory.residents[f"m{i}"])
        memory.end_request(memory.residents[f"m{i}"])
    victims = memory.victims.idle(idle_s=50_000)
    assert sorted(v.name for v in victims) == ["m0", *(f"m{i}" for i in range(3, 10))]
    assert counting.read == 0


class CountingSketch(FrequencySketch):
    estimated = 0

    def estimate(self, name: str) -> int:
        self.estimated += 1
        return super().estimate(name)


def test_an_eviction_with_admission_weighs_only_the_models_it_walks() -> None:
    """TinyLFU's test (no more frequent than the newcomer) is asked of the candidates in the
    policy's order until enough are found, not of every model loaded."""
    for policy in (LRUPolicy(), CostAwarePolicy()):
        sketch = CountingSketch(width=1 << 16)  # no two names share a counter
        memory = filled(
            MemoryTier(MemoryBudget(RESIDENTS * KiB, 0), policy, StepClock(), admission=sketch)
        )
        sketch.estimated = 0
        victims = memory.reserve("new", 2 * KiB)
        assert victims is not None and [v.name for v in victims] == ["m0", "m1"]
        assert sketch.estimated <= 3  # the newcomer and the two victims


class CountingLRU(LRUPolicy):
    keyed = 0

    def key(self, item: Any) -> float:
        self.keyed += 1
        return super().key(item)


def test_an_eviction_weighs_a_few_models_not_all() -> None:
    policy = CountingLRU()
    memory = filled(MemoryTier(MemoryBudget(RESIDENTS * KiB, 0), policy, StepClock()), used=True)
    policy.keyed = 0
    victims = memory.reserve("new", 2 * KiB)
    assert victims is not None and [v.name for v in victims] == ["m0", "m1"]
    assert memory.victims.longest_idle_s() > 0
    assert policy.keyed <= 12  # each entry behind its model's use moved once, a few put back


class Worker:
    def __init__(self, worker_id: int) -> None:
        self.worker_id, self.alive, self.pending = worker_id, True, {}


def test_a_copy_that_lowers_a_value_moves_the_model_ahead() -> None:
    """Cost-aware values are per byte: a second copy halves one at the next use."""
    policy = CostAwarePolicy()
    memory = MemoryTier(MemoryBudget(1000 * KiB, 0), policy, StepClock())
    for name, load_ms in (("dear", 4.0), ("cheap", 3.0)):
        memory.reserve(name, 10 * KiB)
        memory.mark_loaded(name, 0, 10 * KiB, load_ms)
    dear, cheap = memory.residents["dear"], memory.residents["cheap"]
    for resident in (dear, cheap):
        memory.begin_request(resident)
        memory.end_request(resident)
    assert [r.name for r in memory.victims.by_policy.walk()] == ["cheap", "dear"]
    assert memory.copies.reserve(dear, 30 * KiB) is not None
    memory.copies.add(dear, 1)
    memory.begin_request(dear)  # its value: 2 hits x 4 ms over 40 KiB, under cheap's 1 x 3 / 10
    memory.end_request(dear)
    assert [r.name for r in memory.victims.by_policy.walk()] == ["dear", "cheap"]


order_steps = st.lists(
    st.tuples(
        st.sampled_from(["load", "hit", "copy", "uncopy", "unload", "pin-load"]),
        st.integers(0, 9),
        st.integers(1, 30),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(order_steps, st.booleans())
def test_the_policys_order_is_a_sort_of_the_loaded_models(
    ops: list[tuple[str, int, int]], cost_aware: bool
) -> None:
    """Kept lazily (a hit pushes nothing; a copy that lowers a cost-aware value does), read in
    full it is what sorting every loaded model by the policy's key gives."""
    policy = CostAwarePolicy() if cost_aware else LRUPolicy()
    memory = MemoryTier(
        MemoryBudget(100 * KiB, 0), policy, StepClock(), admission=FrequencySketch()
    )
    for op, index, size in ops:
        name, resident = f"m{index}", memory.get(f"m{index}")
        if op in ("load", "pin-load") and resident is None:
            for victim in memory.reserve(name, size * KiB, pinned=op == "pin-load") or []:
                memory.remove(victim.name)
            if memory.get(name) is not None:
                memory.mark_loaded(name, 0, size * KiB, float(index + 1))
        elif resident is None or resident.state is not State.LOADED:
            continue
        elif op == "hit":
            memory.begin_request(resident)
            memory.end_request(resident)
        elif op == "copy" and memory.copies.reserve(resident, size * KiB) is not None:
            memory.copies.add(resident, len(resident.workers))
        elif op == "uncopy" and len(resident.workers) > 1:
            memory.copies.remove(resident, resident.workers[-1])
            memory.copies.release(resident)
        elif op == "unload":
            memory.begin_unload(name)
            memory.remove(name)
        loaded = [r for r in dict.values(memory.residents) if r.state is State.LOADED]
        expected = sorted(loaded, key=lambda r: (policy.key(r), r.seq))
        assert [r.name for r in memory.victims.by_policy.walk()] == [r.name for r in expected]


steps = st.lists(
    st.tuples(
        st.sampled_from(
            ["load", "loaded", "gone", "remove", "unload", "copy", "uncopy", "release", "overflow"]
        ),
        st.integers(0, 7),
        st.integers(1, 40),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(steps)
def test_running_totals_equal_a_full_count(ops: list[tuple[str, int, int]]) -> None:
    """Whatever the order of reservations, loads, copies, unloads and removals."""
    memory = MemoryTier(MemoryBudget(100 * KiB, 10 * KiB), LRUPolicy(), StepClock())
    for op, index, size in ops:
        apply(memory, op, f"m{index}", size * KiB, index % 3)
        residents = list(dict.values(memory.residents))
        kept = [r for r in residents if not r.room_taken]
        assert memory.committed_bytes == memory.budget.baseline_bytes + sum(r.bytes for r in kept)
        leaving = sum(r.bytes for r in kept if r.state is State.UNLOADING)
        assert memory.leaving_bytes == leaving
        by_worker: dict[int, int] = {}
        for resident in residents:
            for worker_id in resident.workers:
                by_worker[worker_id] = by_worker.get(worker_id, 0) + resident.footprint
        assert {w: b for w, b in memory.copies.held_by_worker().items() if b} == by_worker
        copied = {r.name for r in residents if len(r.workers) > 1}
        assert {r.name for r in memory.copies.copied()} == copied
        before = memory.budget.baseline_bytes
        memory.observe(before + sum(r.bytes for r in residents), memory.released_bytes)
        settled = all(r.state is State.LOADED for r in residents)
        assert (
            memory.budget.baseline_bytes == before
            if settled
            else memory.budget.baseline_bytes >= before
        )


def apply(memory: MemoryTier, op: str, name: str, size: int, worker: int) -> None:
    resident = memory.get(name)
    if op == "load" and resident is None:
        for victim in memory.reserve(name, size) or []:
            memory.remove(victim.name)
    elif resident is None:
        return
    elif op == "loaded" and resident.state is State.LOADING:
        memory.mark_loaded(name, worker, size, 1.0)
    elif op == "gone" and resident.state is State.LOADING:
        memory.victims_gone(resident, size)
    elif op == "remove":
        memory.remove(name)
    elif op == "unload" and resident.state is State.LOADED:
        memory.begin_unload(name)
    elif op == "copy" and resident.state is State.LOADED and worker not in resident.workers:
        if memory.copies.reserve(resident, size) is not None:
            memory.copies.add(resident, worker)
    elif op == "uncopy" and len(resident.workers) > 1:
        memory.copies.remove(resident, resident.workers[-1])
        memory.copies.release(resident)
    elif op == "release" and resident.state is State.LOADED:
        memory.copies.release(resident, min(size, resident.bytes))
    elif op == "overflow":
        memory.overflow_victims()
