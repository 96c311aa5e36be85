"""The fair slots alone: who gets a freed slot, and what a caller that leaves gives back."""

from __future__ import annotations

import asyncio

import pytest

from modelhost.errors import DeadlineExceeded
from modelhost.scheduler.admission import FairAdmission


def test_a_freed_slot_goes_to_the_tenant_behind() -> None:
    """a holds the only slot and has three more waiting; b's one request, arriving last, is
    lifted level with a and goes first, having fewer waiting."""
    assert asyncio.run(first_turns()) == ["b", "a", "a", "a"]


async def first_turns() -> list[str]:
    """The tenants in the order they get the one slot."""
    slots = FairAdmission(1, 8)
    held = await slots.acquire("a")
    waiting = [asyncio.ensure_future(slots.acquire(t)) for t in ("a", "a", "a", "b")]
    await asyncio.sleep(0)
    order = []
    while waiting:
        slots.release(held, 1.0)
        await asyncio.sleep(0)
        done = [task for task in waiting if task.done()]
        assert len(done) == 1
        held = done[0].result()
        order.append(held.tenant)
        waiting.remove(done[0])
    slots.release(held, 1.0)
    assert slots.queue.in_flight == 0
    return order


def test_a_caller_leaving_once_granted_passes_the_slot_on() -> None:
    """The slot is handed to b's waiting request, but b's caller leaves before it runs: the
    slot is freed (and the charge taken back), not lost."""

    async def scenario() -> FairAdmission:
        slots = FairAdmission(1, 4)
        held = await slots.acquire("a")
        leaving = asyncio.ensure_future(slots.acquire("b"))
        await asyncio.sleep(0)
        slots.release(held, 1.0)  # hands the slot to b's request at once
        leaving.cancel()
        with pytest.raises(asyncio.CancelledError):
            await leaving
        return slots

    slots = asyncio.run(scenario())
    assert slots.queue.in_flight == 0 and not slots.queue.statistics().running


def test_a_request_waiting_past_its_deadline_gets_504() -> None:
    """The response timeout covers the wait for a slot: past it, the request leaves its
    tenant's queue with DeadlineExceeded, and the slot's holder keeps it."""

    async def scenario() -> FairAdmission:
        slots = FairAdmission(1, 4, wait_s=0.01)
        await slots.acquire("a")
        with pytest.raises(DeadlineExceeded, match="tenant b's request waited 0.01 s"):
            await slots.acquire("b")
        return slots

    slots = asyncio.run(scenario())
    assert slots.queue.in_flight == 1 and len(slots.queue) == 0


def test_a_free_slot_is_taken_without_waiting_unless_someone_waits() -> None:
    """The hot path's slot: given at once while one is free, never past a request that waits."""
    asyncio.run(free_slots())


async def free_slots() -> None:
    slots = FairAdmission(2, 8)
    first = slots.take_free("a")
    assert first is not None and slots.queue.in_flight == 1
    assert slots.take_free("b") is not None
    assert slots.take_free("b") is None  # both slots held
    waiting = asyncio.ensure_future(slots.acquire("b"))
    await asyncio.sleep(0)
    slots.release(first, 1.0)  # the freed slot goes to the one waiting
    await asyncio.sleep(0)
    assert waiting.done() and slots.take_free("a") is None
