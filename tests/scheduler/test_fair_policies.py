"""The tenants file's weights, caps and rates, as the fair queue and the fair slots apply them."""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy
from modelhost.errors import DeadlineExceeded, RateLimited, TenantQueueFull
from modelhost.fair import FairQueue, Ticket
from modelhost.scheduler.admission import FairAdmission

TENANTS = ("a", "b", "c")

operation = st.one_of(
    st.tuples(st.just("push"), st.sampled_from(TENANTS)),
    st.tuples(st.just("pop"), st.just("")),
    st.tuples(st.just("complete"), st.integers(0, 50)),
)
caps = st.fixed_dictionaries({tenant: st.integers(0, 3) for tenant in TENANTS})


@settings(max_examples=200, deadline=None)
@given(st.lists(operation, max_size=120), caps)
def test_no_tenant_runs_past_its_cap_and_no_slot_waits_for_nothing(
    operations: list[tuple[str, object]], cap: dict[str, int]
) -> None:
    """Whatever arrives and ends in whatever order: a tenant never has more running than its
    cap (0: none), and pop finds nothing only when every waiting tenant is at its cap."""
    queue: FairQueue[int] = FairQueue(1000, cap=cap.__getitem__)
    ids, running = itertools.count(), []
    for op, argument in operations:
        if op == "push":
            queue.push(str(argument), next(ids))
        elif op == "pop":
            picked = queue.pop()
            waiting = queue.statistics().waiting
            if picked is None:
                assert all(queue.at_cap(tenant) for tenant in waiting)
            else:
                running.append(picked[1])
        elif running:
            ticket = running.pop(int(str(argument)) % len(running))
            queue.complete(ticket, 1.0)
        counts = Counter(ticket.tenant for ticket in running)
        assert all(not cap[t] or counts[t] <= cap[t] for t in TENANTS), (counts, cap)
        assert queue.statistics().running == {t: n for t, n in counts.items() if n}


def weighted(weights: dict[str, float]) -> TenantPolicies:
    return TenantPolicies(named={t: TenantPolicy(weight=w) for t, w in weights.items()})


async def turns(slots: FairAdmission, arrivals: dict[str, int], served: int) -> list[str]:
    """One slot; `arrivals` requests of each tenant waiting; the tenants of the next `served`
    requests to get it, each costing the same."""
    held = await slots.acquire("warm-up")
    waiting = [
        asyncio.ensure_future(slots.acquire(tenant))
        for tenant, n in arrivals.items()
        for _ in range(n)
    ]
    await asyncio.sleep(0)
    order = []
    for _ in range(served):
        slots.release(held, 5.0)
        await asyncio.sleep(0)
        done = [task for task in waiting if task.done()]
        assert len(done) == 1
        held = done[0].result()
        waiting.remove(done[0])
        order.append(held.tenant)
    for task in waiting:
        task.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)
    slots.release(held, 5.0)
    return order


def test_weights_1_2_4_from_the_file_are_served_in_those_ratios() -> None:
    slots = FairAdmission(1, 1000, policies=lambda: weighted({"a": 1, "b": 2, "c": 4}))
    order = asyncio.run(turns(slots, {"a": 300, "b": 300, "c": 300}, 350))
    assert Counter(order) == {"a": 50, "b": 100, "c": 200}


def test_a_new_weight_takes_effect_without_rewiring() -> None:
    """The slots read the policies through the getter: a reloaded file's weights apply."""
    current = [weighted({"a": 1, "b": 1})]
    slots = FairAdmission(1, 1000, policies=lambda: current[0])

    async def scenario() -> tuple[list[str], list[str]]:
        before = await turns(slots, {"a": 200, "b": 200}, 100)
        current[0] = weighted({"a": 1, "b": 3})
        after = await turns(slots, {"a": 200, "b": 200}, 200)
        return before, after

    before, after = asyncio.run(scenario())
    assert Counter(before) == {"a": 50, "b": 50}
    assert abs(Counter(after)["b"] - 150) <= 2


def test_a_tenant_at_its_cap_waits_while_slots_are_free() -> None:
    """a may run 2 at once in a server of 10 slots: its third waits, b's request does not, and
    the third runs when one of a's ends."""
    policies = TenantPolicies(named={"a": TenantPolicy(max_concurrency=2)})

    async def scenario() -> None:
        slots = FairAdmission(10, 8, policies=lambda: policies)
        first, _ = await slots.acquire("a"), await slots.acquire("a")
        third = asyncio.ensure_future(slots.acquire("a"))
        await asyncio.sleep(0)
        assert not third.done()
        await asyncio.wait_for(slots.acquire("b"), 1)  # b is not held behind a's cap
        assert slots.queue.in_flight == 3
        slots.release(first, 1.0)
        await asyncio.sleep(0)
        assert third.done() and third.result().tenant == "a"

    asyncio.run(scenario())


def test_a_capped_tenants_full_queue_is_refused_before_any_load() -> None:
    """a, at its cap with its queue full, is refused at admission though slots are free."""
    policies = TenantPolicies(named={"a": TenantPolicy(max_concurrency=1)})

    async def scenario() -> None:
        slots = FairAdmission(10, 1, policies=lambda: policies)
        await slots.acquire("a")
        waiting = asyncio.ensure_future(slots.acquire("a"))
        await asyncio.sleep(0)
        refused = pytest.raises(TenantQueueFull, match="tenant a has 1 requests waiting")
        with refused as info:
            slots.check("a")
        # the server's slots are free: its own cap is what to raise, not --max-concurrency
        assert "max_concurrency (1) in the tenants file" in str(info.value)
        assert "--max-concurrency" not in str(info.value)
        slots.check("b")
        waiting.cancel()

    asyncio.run(scenario())


def test_a_request_held_by_its_cap_past_its_deadline_says_so() -> None:
    policies = TenantPolicies(TenantPolicy(max_concurrency=1))

    async def scenario() -> Ticket:
        slots = FairAdmission(10, 8, wait_s=0.01, policies=lambda: policies)
        held = await slots.acquire("a")
        with pytest.raises(DeadlineExceeded, match="its max_concurrency of 1 requests running"):
            await slots.acquire("a")
        return held

    assert asyncio.run(scenario()).tenant == "a"


def test_a_tenant_past_its_rate_is_refused_at_admission() -> None:
    policies = TenantPolicies(named={"a": TenantPolicy(rate=1, burst=2)})
    slots = FairAdmission(10, 8, clock=lambda: 0.0, policies=lambda: policies)
    slots.check("a")
    slots.check("a")
    with pytest.raises(RateLimited):
        slots.check("a")
    slots.check("b")  # another tenant's rate is its own


def test_without_a_tenants_file_every_tenant_is_alike_and_unlimited() -> None:
    slots = FairAdmission(2, 8)
    assert slots.rates is None and slots.queue.cap is None
    for _ in range(100):
        slots.check("a")
