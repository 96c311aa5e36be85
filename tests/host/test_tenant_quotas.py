"""Tenants' memory shares under any interleaving of the host (`machine.py`), with models of 18
MiB so that three fill the budget: a and b are t1's, with a guaranteed minimum of one model; c
and d are t2's, with a maximum of one model and a first load. After every step no tenant holds
more than its maximum, in the records or in the workers, and no reservation took a tenant below
its minimum for another tenant's load."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from host.fakes import BUDGET_BYTES, FakeDisk, FakeEvents, FakePool, MiB
from host.machine import Interleavings, Step, arrives, checked, replay, runs_of_30_steps
from modelhost.cache.memory import MemoryBudget, MemoryTier, Resident
from modelhost.cache.quotas import NO_LIMITS, Limits, NoLimits, TenantLimits
from modelhost.errors import InsufficientMemory
from modelhost.host import ModelHost
from modelhost.workers.messages import Load

FOOTPRINT_BYTES = 18 * MiB
LIMITS = {
    "t1": NoLimits(memory_min_bytes=FOOTPRINT_BYTES),
    "t2": NoLimits(memory_max_bytes=FOOTPRINT_BYTES + 21 * MiB),  # a model, and a first load
}


def footprint_of(name: str) -> int:
    return FOOTPRINT_BYTES


def tenant_of(name: str) -> str:
    return "t1" if name in ("a", "b") else "t2"


def limits_of(tenant: str) -> TenantLimits:
    return LIMITS.get(tenant, NO_LIMITS)


class CheckedTier(MemoryTier):
    """The real tier, noting each reservation that took a tenant below its minimum for another."""

    def __init__(self, budget: MemoryBudget, clock: Callable[[], float], limits: Limits) -> None:
        super().__init__(budget, clock=clock, limits=limits)
        self.violations: list[str] = []

    def reserve(
        self, name: str, size_bytes: int, pinned: bool = False, tenant: str = ""
    ) -> list[Resident] | None:
        staying = {t: self.ledger.staying_bytes(t) for t in LIMITS}
        victims = super().reserve(name, size_bytes, pinned, tenant)
        taken: Counter[str] = Counter()
        for victim in victims or []:
            if victim.tenant != tenant:
                taken[victim.tenant] += victim.bytes
        for other, bytes_taken in taken.items():
            if staying[other] - bytes_taken < limits_of(other).memory_min_bytes:
                self.violations.append(f"{name} of {tenant} took {bytes_taken} of {other}")
        return victims


class TenantInterleavings(Interleavings):
    tenant_of = staticmethod(tenant_of)
    footprint = staticmethod(footprint_of)

    def make_memory(self) -> MemoryTier:
        return CheckedTier(MemoryBudget(BUDGET_BYTES, 0), clock=self.clock, limits=limits_of)

    @checked
    def no_tenant_over_its_maximum(self) -> None:
        for tenant, limits in LIMITS.items():
            if limits.memory_max_bytes:
                charged = self.memory.ledger.tenant_bytes[tenant]
                assert charged <= limits.memory_max_bytes, (tenant, self.memory.residents)

    @checked
    def no_tenants_workers_hold_more_than_its_maximum(self) -> None:
        held: Counter[str] = Counter()
        for worker in self.pool.workers.values():
            for model in worker.models:
                held[tenant_of(model)] += self.pool.footprint(model)
        for call in self.pool.calls:
            if isinstance(call.request, Load):
                held[tenant_of(call.request.model)] += self.pool.peak(call.request.model)
        for tenant, limits in LIMITS.items():
            if limits.memory_max_bytes:
                assert held[tenant] <= limits.memory_max_bytes, (tenant, held)

    @checked
    def no_minimum_taken_for_another_tenant(self) -> None:
        assert isinstance(self.memory, CheckedTier)
        assert not self.memory.violations, self.memory.violations

    @checked
    def no_worker_idles_while_a_load_waits(self) -> None:
        """Loads wait in the tenants' fair order, never while a worker could take one."""
        copies = self.host.copies
        if copies.load_order.waiting:
            idle = [
                worker_id
                for worker_id, worker in self.pool.workers.items()
                if worker.alive
                and worker_id not in copies.loaders
                and not any(leaving == worker_id for _, leaving in copies.leaving)
            ]
            assert not idle, (idle, copies.loaders)


TenantInterleavings.TestCase.settings = runs_of_30_steps(300)
TestTenantQuotasUnderAnyInterleaving = TenantInterleavings.TestCase


def loaded(name: str) -> list[Step]:
    """A request for `name`, its load answered, then its batch."""
    return [("request", {"name": name}), ("answer_a_call", {"index": 0})] + [
        ("answer_a_call", {"index": 0})
    ]


def residents_after(steps: list[Step]) -> set[str]:
    """The models in memory once `steps` have run, every invariant checked after each."""
    machine = TenantInterleavings()
    try:
        machine.run_steps(steps)
        return set(machine.memory.residents)
    finally:
        machine.teardown()


def test_second_model_of_a_capped_tenant_evicts_its_first() -> None:
    """d's load would take t2 past its maximum: c goes, not a, which is older."""
    steps = [*loaded("a"), *loaded("c"), ("request", {"name": "d"})]
    assert residents_after([*steps, ("answer_a_call", {"index": 0})]) == {"a", "d"}


def test_guaranteed_model_stays_while_the_other_tenant_loads() -> None:
    """d needs room beyond c's: one of t1's models may go, never both."""
    steps = [*loaded("a"), *loaded("b"), *loaded("c"), ("request", {"name": "d"})]
    after = residents_after(
        [*steps, ("answer_a_call", {"index": 0})] + [("answer_a_call", {"index": 0})]
    )
    assert "d" in after and len(after & {"a", "b"}) == 1, after


def test_waiting_load_sheds_a_copy_loaded_meanwhile() -> None:
    """c waits for room; a, t1's only model, gets a second copy in the room c waits for. a is
    within t1's minimum, so only shedding that copy lets c load (found by the machine)."""
    replay(
        [
            ("request", {"name": "d"}),
            ("request", {"name": "c"}),
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 25}),
            ("request", {"name": "c"}),
            arrives("put", "c", call=6, turns=2),
            ("scale_in", {}),
            ("kill_a_worker", {"respawn": False, "worker": 1}),
            ("kill_a_worker", {"respawn": False, "worker": 1}),
            ("put_min_worker", {"copies": 2, "name": "c"}),
            ("a_worker_joins", {}),
            ("scale_in", {}),
            ("time_passes", {"seconds": 2.0}),
            ("kill_a_worker", {"respawn": True, "worker": 1}),
            ("delete", {"name": "d"}),
            ("idle_unload", {}),
            ("put_min_worker", {"copies": 2, "name": "d"}),
            ("a_worker_joins", {}),
            ("delete", {"name": "b"}),
            arrives("put", "a", call=29, turns=6),
            arrives("request", "c", call=38, turns=6),
            ("time_passes", {"seconds": 0.5}),
        ],
        TenantInterleavings,
    )


def test_load_waiting_on_a_model_that_served_its_waiters_wakes() -> None:
    """c's load needs d gone (t2's maximum), but d is awaited by a request that the shutdown
    then ends: its end must wake c's load (found by the machine)."""
    replay(
        [("shutdown", {}), ("request", {"name": "d"}), arrives("request", "c", call=0)],
        TenantInterleavings,
    )


def host_of_t2(tmp_path: Path, max_mib: int) -> ModelHost:
    """Every model t2's, whose maximum is `max_mib`; loads wait for room 50 ms at most."""
    limits = {"t2": NoLimits(memory_max_bytes=max_mib * MiB)}
    return ModelHost(
        FakePool(1),
        MemoryTier(MemoryBudget(BUDGET_BYTES, 0), limits=lambda t: limits.get(t, NO_LIMITS)),
        FakeDisk(tmp_path),
        FakeEvents(),
        pinned=frozenset(),
        deadline_s=0.05,
        pss_bytes=lambda: 0,
        model_tenant=lambda name: "t2",
    )


def test_model_larger_than_its_tenants_maximum_is_507_naming_the_quota(tmp_path: Path) -> None:
    host = host_of_t2(tmp_path, max_mib=16)
    with pytest.raises(InsufficientMemory) as refused:
        asyncio.run(host.residency.make_room("c", 20 * MiB, "t2"))
    message = str(refused.value)
    assert "model c of tenant t2 needs about 20.0 MiB" in message
    assert "memory_max is 16.0 MiB" in message and "--tenants-file" in message


def test_load_past_its_maximum_with_its_models_busy_is_507_naming_the_quota(
    tmp_path: Path,
) -> None:
    host = host_of_t2(tmp_path, max_mib=30)
    memory = host.memory
    memory.reserve("c", 18 * MiB, tenant="t2")
    memory.mark_loaded("c", 1, 18 * MiB, 1.0)
    memory.begin_request(memory.residents["c"])
    with pytest.raises(InsufficientMemory) as refused:
        asyncio.run(host.residency.make_room("d", 20 * MiB, "t2"))
    message = str(refused.value)
    assert "the tenant holds 18.0 MiB of its memory_max of 30.0 MiB" in message
    assert "stayed busy for 0.05 s" in message and "--tenants-file" in message
