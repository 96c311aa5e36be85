"""Tenants' shares of the memory tier: minimums kept from other tenants, maximums kept by
evicting the tenant's own models."""

from __future__ import annotations

from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import LRUPolicy
from modelhost.cache.quotas import NO_LIMITS, NoLimits, TenantLimits
from modelhost.testing import StepClock

MiB = 2**20


def tier(limits: dict[str, NoLimits] | None = None) -> MemoryTier:
    """100 MiB for models, LRU, and each tenant's limits from `limits`."""
    given = limits or {}

    def limits_of(tenant: str) -> TenantLimits:
        return given.get(tenant, NO_LIMITS)

    budget = MemoryBudget(100 * MiB, 0)
    return MemoryTier(budget, LRUPolicy(), StepClock(), limits=limits_of)


def load(memory: MemoryTier, name: str, tenant: str, size_mib: int = 30) -> list[str]:
    victims = memory.reserve(name, size_mib * MiB, tenant=tenant)
    assert victims is not None, f"{name} of {tenant} found no room"
    for victim in victims:
        memory.remove(victim.name)
    memory.victims_gone(memory.residents[name], size_mib * MiB)
    memory.mark_loaded(name, 1, size_mib * MiB, 1.0)
    return [victim.name for victim in victims]


def test_model_within_its_tenants_minimum_is_not_evicted_for_another() -> None:
    """t1 holds 60 MiB with a minimum of 40: neither of its models can go for t2's load."""
    memory = tier({"t1": NoLimits(memory_min_bytes=40 * MiB)})
    load(memory, "t1/a", "t1")
    load(memory, "t1/b", "t1")
    load(memory, "t2/c", "t2")
    assert load(memory, "t2/d", "t2") == ["t2/c"]
    assert memory.ledger.tenant_bytes["t1"] == 60 * MiB


def test_tenant_above_its_minimum_gives_before_the_policys_first() -> None:
    """t2's model is the least recently used but within its minimum; t1 is above its own."""
    memory = tier(
        {"t1": NoLimits(memory_min_bytes=30 * MiB), "t2": NoLimits(memory_min_bytes=30 * MiB)}
    )
    load(memory, "t2/c", "t2")
    load(memory, "t1/a", "t1")
    load(memory, "t1/b", "t1")
    assert load(memory, "t3/e", "t3") == ["t1/a"]


def test_without_limits_victims_are_the_policys() -> None:
    memory = tier()
    load(memory, "t1/a", "t1")
    load(memory, "t1/b", "t1")
    load(memory, "t2/c", "t2")
    assert load(memory, "t2/d", "t2") == ["t1/a"]


def test_load_past_its_tenants_maximum_evicts_its_own_model() -> None:
    """t2's model is older, but t1's load would take t1 past 60 MiB: t1's oldest goes."""
    memory = tier({"t1": NoLimits(memory_max_bytes=60 * MiB)})
    load(memory, "t2/c", "t2", 10)
    load(memory, "t1/a", "t1")
    load(memory, "t1/b", "t1")
    assert load(memory, "t1/d", "t1") == ["t1/a"]
    assert memory.ledger.tenant_bytes["t1"] == 60 * MiB


def test_load_past_its_maximum_waits_while_its_own_models_are_busy() -> None:
    memory = tier({"t1": NoLimits(memory_max_bytes=60 * MiB)})
    load(memory, "t2/c", "t2", 10)
    load(memory, "t1/a", "t1")
    load(memory, "t1/b", "t1")
    for name in ("t1/a", "t1/b"):
        memory.begin_request(memory.residents[name])
    assert memory.reserve("t1/d", 30 * MiB, tenant="t1") is None
    assert "t1/d" not in memory.residents


def test_tenant_is_charged_its_own_victims_until_they_are_gone() -> None:
    """The reservation counts the victims it evicts of its own tenant: never past the max."""
    memory = tier({"t1": NoLimits(memory_max_bytes=60 * MiB)})
    load(memory, "t1/a", "t1", 20)
    load(memory, "t1/b", "t1", 40)
    victims = memory.reserve("t1/c", 30 * MiB, tenant="t1")
    assert [v.name for v in victims or []] == ["t1/a", "t1/b"]
    assert memory.ledger.tenant_bytes["t1"] == 60 * MiB  # both victims still in memory
    for victim in victims or []:
        memory.remove(victim.name)
    memory.victims_gone(memory.residents["t1/c"], 30 * MiB)
    assert memory.ledger.tenant_bytes["t1"] == 30 * MiB


def test_other_tenants_victims_stay_theirs_until_gone() -> None:
    memory = tier()
    load(memory, "t1/a", "t1", 60)
    load(memory, "t2/b", "t2", 40)
    victims = memory.reserve("t2/c", 50 * MiB, tenant="t2")
    assert [v.name for v in victims or []] == ["t1/a"]
    assert memory.ledger.tenant_bytes == {"t1": 60 * MiB, "t2": 90 * MiB}


def test_copy_is_refused_past_its_tenants_maximum() -> None:
    memory = tier({"t1": NoLimits(memory_max_bytes=50 * MiB)})
    load(memory, "t1/a", "t1")
    assert memory.copies.reserve(memory.residents["t1/a"], 0) is None
    load(memory, "t2/b", "t2")
    assert memory.copies.reserve(memory.residents["t2/b"], 0) == 30 * MiB


def test_memory_pressure_takes_from_a_minimum_only_when_nothing_else_frees_enough() -> None:
    memory = tier({"t1": NoLimits(memory_min_bytes=60 * MiB)})
    load(memory, "t1/a", "t1")
    load(memory, "t2/b", "t2")
    load(memory, "t1/c", "t1")
    memory.budget.baseline_bytes += 20 * MiB  # the server grew: 10 MiB over
    assert [v.name for v in memory.overflow_victims()] == ["t2/b"]
    memory.remove("t2/b")
    memory.budget.baseline_bytes += 40 * MiB
    assert [v.name for v in memory.overflow_victims()] == ["t1/a"]


def test_tenants_off_charge_everything_to_the_server() -> None:
    memory = tier({"": NoLimits(memory_max_bytes=MiB)})
    load(memory, "a", "")
    load(memory, "b", "")
    assert memory.ledger.tenant_bytes == {"": 60 * MiB}
