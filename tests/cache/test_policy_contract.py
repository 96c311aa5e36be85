"""One contract for every eviction policy, with and without the admission filter and a minimum
residency (like cachetools' CacheTestMixin): Hypothesis access sequences replayed through a
`MemoryTier` as the host drives it, no processes. `simulate`'s replay must agree with the tier's
hit count, which is what lets the simulator predict the server."""

from __future__ import annotations

import random
from collections import OrderedDict
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryBudget, MemoryTier, Resident, State
from modelhost.cache.policy import POLICIES, policy_named
from modelhost.toolkit.simulate.replay import replay
from modelhost.toolkit.simulate.run import Replayed
from modelhost.toolkit.simulate.trace import make_trace

MiB = 2**20
BUDGET_BYTES, BASELINE_BYTES = 100 * MiB, 20 * MiB
NAMES = [f"m{i}" for i in range(8)]
PINNED = {"m7"}


@dataclass(frozen=True)
class Setup:
    policy: str
    tinylfu: bool
    min_residency_s: float

    def tier(self, clock: list[float], budget_bytes: int = BUDGET_BYTES) -> MemoryTier:
        return MemoryTier(
            MemoryBudget(budget_bytes, BASELINE_BYTES),
            policy_named(self.policy),
            lambda: clock[0],
            admission=FrequencySketch() if self.tinylfu else None,
            min_residency_s=self.min_residency_s,
        )


SETUPS = [
    Setup(policy, tinylfu, residency)
    for policy in POLICIES
    for tinylfu in (False, True)
    for residency in (0.0, 3.0)
]


@dataclass
class Driver:
    """Serves requests one at a time the way the host does: hit, or reserve → unload victims →
    load; a refused reservation is a miss that changes nothing (the host would wait, then 507)."""

    setup: Setup
    sizes: dict[str, int]
    pinned: frozenset[str] = frozenset(PINNED)
    clock: list[float] = field(default_factory=lambda: [0.0])
    hits: int = 0

    def __post_init__(self) -> None:
        self.memory = self.setup.tier(self.clock)

    def request(self, name: str, hold: bool = False) -> None:
        resident = self.memory.get(name) or self.load(name)
        if resident is None:
            return
        self.hits += resident.hits > 0
        self.memory.begin_request(resident)
        if not hold:
            self.memory.end_request(resident)

    def load(self, name: str) -> Resident | None:
        if not self.memory.fits_ever(self.sizes[name]):
            return None
        victims = self.memory.reserve(name, self.sizes[name], pinned=name in self.pinned)
        if victims is None:
            return None
        for victim in victims:
            self.check_victim(victim)
            self.memory.remove(victim.name)
        self.memory.mark_loaded(name, 1, self.sizes[name], load_ms=10.0 * self.sizes[name] / MiB)
        return self.memory.residents[name]

    def check_victim(self, victim: Resident) -> None:
        assert victim.in_flight == 0 and not victim.pinned
        assert victim.loaded_at_s is not None
        assert self.clock[0] - victim.loaded_at_s >= self.setup.min_residency_s

    def release(self, name: str) -> None:
        resident = self.memory.get(name)
        if resident is not None and resident.in_flight:
            self.memory.end_request(resident)


sizes_mib = st.fixed_dictionaries({name: st.integers(1, 40) for name in NAMES})
steps = st.lists(
    st.tuples(
        st.sampled_from(["request", "hold", "release"]), st.sampled_from(NAMES), st.integers(0, 4)
    ),
    max_size=80,
)


@pytest.mark.parametrize("setup", SETUPS, ids=str)
@settings(max_examples=60, deadline=None)
@given(sizes=sizes_mib, script=steps)
def test_budget_holds_and_victims_are_idle(
    setup: Setup, sizes: dict[str, int], script: list[tuple[str, str, int]]
) -> None:
    """The budget holds and victims are idle unpinned and settled."""
    driver = Driver(setup, {n: s * MiB for n, s in sizes.items()})
    for action, name, dt_s in script:
        driver.clock[0] += dt_s
        if action == "release":
            driver.release(name)
        else:
            driver.request(name, hold=action == "hold")
        assert driver.memory.committed_bytes <= BUDGET_BYTES
        assert all(r.state is State.LOADED for r in driver.memory)


plain_trace = st.lists(
    st.tuples(st.sampled_from(NAMES), st.integers(0, 4)), min_size=1, max_size=80
)


@pytest.mark.parametrize("setup", SETUPS, ids=str)
@settings(max_examples=60, deadline=None)
@given(sizes=sizes_mib, requests=plain_trace)
def test_simulate_replays_the_same_hits_as_the_memory_tier(
    setup: Setup, sizes: dict[str, int], requests: list[tuple[str, int]]
) -> None:
    driver = Driver(setup, {n: s * MiB for n, s in sizes.items()}, pinned=frozenset())
    times = []
    for name, dt_s in requests:
        driver.clock[0] += dt_s
        times.append(driver.clock[0])
        driver.request(name)
    models = [name for name, _ in requests]
    costs = {n: [10.0 * s] for n, s in sizes.items()}
    trace = make_trace(models, driver.sizes, costs, times)
    spec = Replayed(setup.policy, "tinylfu" if setup.tinylfu else "none", setup.min_residency_s)
    assert spec.hits(trace, BUDGET_BYTES - BASELINE_BYTES) == driver.hits


def brute_force_lru(models: list[str], sizes: dict[str, int], capacity_bytes: int) -> int:
    cache: OrderedDict[str, int] = OrderedDict()
    hits = 0
    for model in models:
        if model in cache:
            hits += 1
            cache.move_to_end(model)
        elif sizes[model] <= capacity_bytes:
            cache[model] = sizes[model]
            while sum(cache.values()) > capacity_bytes:
                cache.popitem(last=False)
    return hits


@settings(max_examples=200, deadline=None)
@given(sizes=sizes_mib, requests=plain_trace)
def test_lru_equals_a_brute_force_lru(
    sizes: dict[str, int], requests: list[tuple[str, int]]
) -> None:
    setup = Setup("lru", tinylfu=False, min_residency_s=0.0)
    driver = Driver(setup, {n: s * MiB for n, s in sizes.items()}, pinned=frozenset())
    models = [name for name, _ in requests]
    for name in models:
        driver.clock[0] += 1
        driver.request(name)
    capacity = BUDGET_BYTES - BASELINE_BYTES
    assert driver.hits == brute_force_lru(models, driver.sizes, capacity)


def zipf_with_scan(requests: int, seed: int = 7) -> list[str]:
    """Zipf(1.0) over 100 models, every fourth request a model never seen before (a scan)."""
    rng = random.Random(seed)
    hot = [f"hot-{k}" for k in range(100)]
    weights = [1.0 / k for k in range(1, 101)]
    picks = rng.choices(hot, weights=weights, k=requests)
    return [f"scan-{i}" if i % 4 == 3 else picks[i] for i in range(requests)]


def test_admission_keeps_the_hot_set_through_a_scan() -> None:
    """LRU, the default, is the policy a scan flushes; the cost-aware one already ranks a one-off
    model lowest, so the filter changes it by a few hits either way (docs/decisions.md)."""
    models = zipf_with_scan(8000)
    trace = make_trace(models, dict.fromkeys(models, MiB))
    budget_bytes = 10 * MiB  # room for 10 of the 100 hot models
    plain = replay(trace, budget_bytes, policy_named("lru"))
    filtered = replay(trace, budget_bytes, policy_named("lru"), FrequencySketch())
    assert filtered > plain


def test_with_admission_every_request_is_still_served() -> None:
    models = zipf_with_scan(2000)
    driver = Driver(Setup("lru", tinylfu=True, min_residency_s=0.0), dict.fromkeys(models, MiB))
    for name in models:
        driver.request(name)
        assert driver.memory.get(name) is not None  # loaded, however rare
