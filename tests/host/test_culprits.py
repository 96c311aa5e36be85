"""Which model, and which tenant, kills its workers: each death's blame shared among what the
worker ran."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.memory import Resident
from modelhost.errors import TenantHeldBack
from modelhost.host.culprits import (
    TENANT_HELD_AT,
    WINDOW_S,
    Culprits,
    HeldBack,
    shares_of,
    tenants_shares,
)
from modelhost.host.failed_loads import FailedLoads
from modelhost.records.events import EventLog
from modelhost.workers.running import BATCH, Record


def died(culprits: Culprits, batches: frozenset[str], loading: str = "") -> list[str]:
    """As HeldBack tells it a death: only models that ran batches are held back here."""
    return culprits.died(shares_of(batches, loading), batches)


def test_a_model_running_alone_at_two_deaths_is_held_back() -> None:
    culprits = Culprits()
    assert died(culprits, frozenset({"poisoned"})) == []
    assert died(culprits, frozenset({"poisoned"})) == ["poisoned"]


def test_deaths_beside_other_models_loads_take_more_of_them() -> None:
    """A different model loading at each death: half a blame each time."""
    culprits = Culprits()
    held = [died(culprits, frozenset({"poisoned"}), f"reloaded-{n}") for n in range(4)]
    assert held == [[], [], [], ["poisoned"]]


def test_a_load_is_never_held_back_here() -> None:
    """A model whose load kills its worker is failed_loads.py's to judge."""
    culprits = Culprits()
    assert [died(culprits, frozenset(), "broken") for _ in range(4)] == [[]] * 4


def test_a_model_running_beside_a_broken_load_twice_is_not_held_back() -> None:
    culprits = Culprits()
    assert [died(culprits, frozenset({"hot"}), "broken") for _ in range(2)] == [[], []]


def test_deaths_older_than_the_window_are_forgotten() -> None:
    now = [0.0]
    culprits = Culprits(clock=lambda: now[0])
    died(culprits, frozenset({"poisoned"}))
    now[0] += WINDOW_S
    assert died(culprits, frozenset({"poisoned"})) == []
    now[0] += WINDOW_S - 1
    assert died(culprits, frozenset({"poisoned"})) == ["poisoned"]


def test_a_model_held_back_is_blamed_for_nothing_more() -> None:
    culprits = Culprits()
    for _ in range(2):
        died(culprits, frozenset({"poisoned"}))
    assert culprits.blame("poisoned") == 0
    assert died(culprits, frozenset({"other"})) == []


deaths = st.lists(
    st.tuples(
        st.frozensets(st.sampled_from(["a", "b", "c", "d"]), max_size=3),
        st.sampled_from(["", "a", "loaded"]),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None)
@given(deaths)
def test_a_model_is_held_back_only_once_it_carries_two_deaths_blame(
    plan: list[tuple[frozenset[str], str]],
) -> None:
    """Whatever the deaths: a model held back had run batches at the death that held it and
    carried at least two deaths' blame; one only ever running batches is left with less."""
    culprits = Culprits()
    for batches, loading in plan:
        before = {name: culprits.blame(name) for name in batches}
        suspects = len(batches | ({loading} if loading else set()))
        for name in died(culprits, batches, loading):
            assert name in batches and before[name] + 1 / suspects >= 2 - 1e-9
        assert all(culprits.blame(name) < 2 - 1e-9 for name in "bcd")


def test_a_tenant_is_blamed_its_models_shares_summed() -> None:
    shares = shares_of(frozenset({"a/1", "a/2", "b/1"}), "c/1")
    owners = {"a/1": "a", "a/2": "a", "b/1": "b", "c/1": "c"}
    assert tenants_shares(shares, owners) == {"a": 0.5, "b": 0.25, "c": 0.25}


def test_no_tenant_is_blamed_while_tenants_are_off() -> None:
    assert tenants_shares(shares_of(frozenset({"m"})), {"m": ""}) == {}


def test_a_tenant_is_held_back_at_two_models_worth_of_deaths() -> None:
    """Two models each killing twice alone: the tenant at the fourth death, once."""
    tenants = Culprits(TENANT_HELD_AT)
    held = [tenants.died({"noisy": 1.0}, ["noisy"]) for _ in range(5)]
    assert held == [[], [], [], ["noisy"], []]


def test_a_tenant_beside_a_killer_at_each_death_is_held_back_later() -> None:
    tenants = Culprits(TENANT_HELD_AT)
    held = [tenants.died({"noisy": 0.5, "quiet": 0.5}, ["noisy", "quiet"]) for _ in range(7)]
    assert held == [[]] * 7


def test_a_held_back_tenant_loses_its_models_and_loads_none_for_the_window() -> None:
    asyncio.run(tenant_held_back())


async def tenant_held_back() -> None:
    now, unloaded = [0.0], []

    async def unload(name: str, reason: str) -> None:
        unloaded.append((name, reason))

    events = EventLog()
    models = [
        Resident("noisy/a", 1, workers=[1], tenant="noisy"),
        Resident("noisy/elsewhere", 1, workers=[2], tenant="noisy"),
        Resident("quiet/m", 1, workers=[1], tenant="quiet"),
    ]
    held = HeldBack(
        FailedLoads(),
        events,
        version_of=lambda name: None,  # type: ignore[arg-type,return-value]  # never asked
        unload=unload,
        models=models,
        clock=lambda: now[0],
    )
    killer = Record(frozenset({"noisy/a"}), crashed=(BATCH, "noisy/a"))
    for _ in range(4):
        held.died(killer, 1)
    await asyncio.sleep(0)
    assert ("noisy/elsewhere", "tenant_held_back") in unloaded
    assert all(name != "quiet/m" for name, _ in unloaded)
    held.check("quiet")
    now[0] = WINDOW_S - 0.5
    with pytest.raises(TenantHeldBack, match="tenant noisy is held back for 1 s more") as refused:
        held.check("noisy")
    assert refused.value.retry_after_s == 1
    now[0] = WINDOW_S
    held.check("noisy")
    [event] = [e for e in events.recent if e.reason == "tenant_held_back"]
    assert event.detail["tenant"] == "noisy"


def test_a_death_s_blame_leans_on_the_model_that_served_least_since_its_load() -> None:
    """Uniform prior, a kill rate's posterior mean: 1 / (n + 2) after n requests served."""
    shares = shares_of(frozenset({"busy", "killer"}), served={"busy": 196, "killer": 0})
    assert shares == pytest.approx({"busy": 0.01, "killer": 0.99})
    assert shares_of(frozenset({"a"}), "b", served={"a": 0}) == {"a": 0.5, "b": 0.5}


def test_a_busy_model_beside_an_unnamed_killer_is_not_held_back() -> None:
    asyncio.run(busy_beside_an_unnamed_killer())


async def busy_beside_an_unnamed_killer() -> None:
    unloaded: list[str] = []

    async def unload(name: str, reason: str) -> None:
        unloaded.append(name)

    busy = Resident("quiet/busy", 1, workers=[1], tenant="quiet")
    killers = [Resident(f"noisy/{n}", 1, workers=[1], tenant="noisy") for n in range(4)]

    async def version() -> str:
        return "1"

    held = HeldBack(FailedLoads(), EventLog(), lambda name: version, unload, [busy, *killers])
    for killer in killers:  # each killed twice unnamed, the busy model's batch beside it
        for _ in range(2):
            busy.hits, killer.hits = 200, 1  # reloaded, it served this much since
            killer.in_flight = 1
            held.died(Record(frozenset({busy.name, killer.name})), 1)
    await asyncio.sleep(0)
    assert "quiet/busy" not in unloaded and set(unloaded) >= {k.name for k in killers}
    held.check("quiet")
    with pytest.raises(TenantHeldBack):
        held.check("noisy")


def test_a_death_of_all_aboard_blames_each_model_of_its_worker_alone() -> None:
    """A worker whose scratch folder filled ran nothing named: each model it held is a suspect,
    and none of another worker."""
    asyncio.run(all_aboard())


async def all_aboard() -> None:
    unloaded: list[str] = []

    async def unload(name: str, reason: str) -> None:
        unloaded.append(name)

    async def version() -> str:
        return "1"

    fills = Resident("noisy/fills", 1, workers=[1], tenant="noisy")
    elsewhere = Resident("quiet/model", 1, workers=[2], tenant="quiet")
    held = HeldBack(FailedLoads(), EventLog(), lambda name: version, unload, [fills, elsewhere])
    for _ in range(2):
        held.died(Record(frozenset(), aboard=True), 1)
    await asyncio.sleep(0)
    assert unloaded == ["noisy/fills"]
