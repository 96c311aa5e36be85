"""The server's PSS is read at a bounded rate: concurrent callers share one reading, a fresh one
serves later callers, and each is set against the records of the moment it was taken."""

from __future__ import annotations

import asyncio
import threading

import pytest

from modelhost.cache.memory import FrontendAllowance, MemoryBudget, MemoryTier
from modelhost.host import memory_readings
from modelhost.host.memory_readings import FRESH_S, MemoryReadings, PssReading

MiB = 2**20


class SlowReader:
    """A PSS reader that counts its calls and blocks until released, as /proc does for ms."""

    def __init__(self, value: int) -> None:
        self.value = value
        self.calls = 0
        self.release = threading.Event()

    def __call__(self) -> int:
        self.calls += 1
        self.release.wait(5)
        return self.value


def test_misses_at_once_share_one_reading() -> None:
    memory = MemoryTier(MemoryBudget(1000 * MiB, 100 * MiB))
    reader = SlowReader(150 * MiB)
    readings = MemoryReadings(reader, memory, off_loop=True)

    async def scenario() -> None:
        callers = [asyncio.ensure_future(readings.observe()) for _ in range(16)]
        await asyncio.sleep(0.05)
        reader.release.set()
        await asyncio.gather(*callers)

    asyncio.run(scenario())
    assert reader.calls == 1
    assert memory.budget.baseline_bytes == 150 * MiB  # nothing loaded: all of it is the baseline
    assert readings.last_bytes == 150 * MiB


def test_fresh_reading_is_reused() -> None:
    """A fresh reading serves and a stale one is taken again."""
    memory = MemoryTier(MemoryBudget(1000 * MiB, 100 * MiB))
    reader = SlowReader(120 * MiB)
    reader.release.set()
    now = [1000.0]
    readings = MemoryReadings(reader, memory, off_loop=False, clock=lambda: now[0])

    asyncio.run(readings.observe())
    now[0] += FRESH_S / 2
    asyncio.run(readings.observe())
    assert reader.calls == 1
    now[0] += FRESH_S
    reader.value = 130 * MiB
    asyncio.run(readings.observe())
    assert reader.calls == 2
    assert memory.budget.baseline_bytes == 130 * MiB


def test_a_reading_that_lowers_the_baseline_wakes_waiting_loads() -> None:
    """Loads waiting for room held by memory being returned try again when it is back."""
    memory = MemoryTier(MemoryBudget(1000 * MiB, 100 * MiB))
    reader = SlowReader(300 * MiB)
    reader.release.set()
    now, falls = [1000.0], []
    readings = MemoryReadings(
        reader, memory, off_loop=False, clock=lambda: now[0], on_fall=lambda: falls.append(now[0])
    )
    for value in (300, 320, 150, 150):
        reader.value, now[0] = value * MiB, now[0] + FRESH_S
        asyncio.run(readings.observe())
    assert falls == [1000.0 + 3 * FRESH_S]


def test_reading_meets_records_at_completion() -> None:
    """A reading is set against the records when it completes.

    A model loaded while the reading ran is part of what the reading explains."""
    memory = MemoryTier(MemoryBudget(1000 * MiB, 100 * MiB))
    reader = SlowReader(180 * MiB)
    readings = MemoryReadings(reader, memory, off_loop=True)

    async def scenario() -> None:
        observing = asyncio.ensure_future(readings.observe())
        await asyncio.sleep(0.05)
        assert memory.reserve("m", 80 * MiB) == []
        memory.mark_loaded("m", 1, 80 * MiB, 5.0)
        reader.release.set()
        await observing

    asyncio.run(scenario())
    assert memory.budget.baseline_bytes == 100 * MiB


@pytest.mark.parametrize(
    ("reading_mib", "baseline_mib"),
    [
        (180, 100),  # no more than the model unloaded meanwhile: the baseline stays
        (260, 130),  # beyond it (and the load's reservation): the growth is the baseline's
    ],
)
def test_raced_release_raises_only_unexplained(reading_mib: int, baseline_mib: int) -> None:
    """A reading raced by a release raises the baseline only by what the release cannot explain.

    Under churn something always loads, so the baseline may only grow: a reading that still
    held a model unloaded before it completed would raise it by that model for good. Yet nearly
    every reading races a release (two workers loading 59 models a second, a reading of four
    processes taking 16 ms): setting them all aside left the baseline stale while the server
    grew, and the PSS went over the budget. The bytes released meanwhile are all a reading can
    hold that the records no longer explain; what is beyond them is growth."""
    memory = MemoryTier(MemoryBudget(1000 * MiB, 100 * MiB))
    assert memory.reserve("leaving", 80 * MiB) == []
    memory.mark_loaded("leaving", 1, 80 * MiB, 5.0)
    assert memory.reserve("loading", 50 * MiB) == []  # in motion: the baseline may only grow
    reader = SlowReader(reading_mib * MiB)  # taken while "leaving" was still in the worker
    readings = MemoryReadings(reader, memory, off_loop=True)

    async def scenario() -> None:
        observing = asyncio.ensure_future(readings.observe())
        await asyncio.sleep(0.05)
        memory.begin_unload("leaving")
        memory.remove("leaving")
        reader.release.set()
        await observing

    asyncio.run(scenario())
    assert memory.budget.baseline_bytes == baseline_mib * MiB


def test_a_split_reading_charges_the_frontend_at_its_allowance() -> None:
    """The frontend's PSS is read apart from the workers': its growth within the allowance said
    at start leaves the room for models as it was."""
    frontend = FrontendAllowance(start_bytes=40 * MiB, growth_bytes=64 * MiB)
    memory = MemoryTier(MemoryBudget(1000 * MiB, 100 * MiB, frontend=frontend))
    room = memory.budget.capacity_bytes
    grown = PssReading(total_bytes=(60 + 90) * MiB, frontend_bytes=90 * MiB)
    readings = MemoryReadings(lambda: grown, memory, off_loop=False)
    asyncio.run(readings.observe())
    assert memory.budget.capacity_bytes == room
    assert readings.last_bytes == 150 * MiB  # what the OS measured, for /stats and /metrics
    assert memory.budget.frontend_bytes == 90 * MiB


class FrontendHeap:
    """The frontend's PSS as a trim finds it: `freed` comes back, the rest stays."""

    def __init__(self, held: int) -> None:
        self.held, self.freed, self.trims = held, 0, 0

    def pss(self, pid: object = "self") -> int:
        return self.held + self.freed

    def trim(self) -> None:
        self.trims, self.freed = self.trims + 1, 0


def test_the_frontend_heap_is_trimmed_when_it_has_grown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large bodies' freed pages come back instead of shrinking the models' room for good
    (CI: a cold load answered 507 after 60 s while the frontend held 40 MiB past its start);
    within its allowance, where they cost the models nothing, the heap is left alone."""
    heap = FrontendHeap(held=100 * MiB)
    monkeypatch.setattr(memory_readings, "pss_bytes", heap.pss)
    monkeypatch.setattr(memory_readings, "trim_heap", heap.trim)
    allowance = 120 * MiB
    read = memory_readings.ServerPss(lambda: [], lambda: allowance)
    heap.freed = 16 * MiB  # grown, but within the allowance
    assert read().frontend_bytes == 116 * MiB
    assert heap.trims == 0
    heap.freed = 40 * MiB
    assert read() == PssReading(100 * MiB, 100 * MiB)
    heap.held += 40 * MiB  # grown for good: one trim finds that out, and no more follow
    assert read().frontend_bytes == 140 * MiB
    assert read().frontend_bytes == 140 * MiB
    assert heap.trims == 2
    heap.freed = memory_readings.TRIM_STEP_BYTES - 1  # too little to be worth a trim
    assert read().frontend_bytes == 140 * MiB + heap.freed
    assert heap.trims == 2
