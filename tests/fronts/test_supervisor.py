"""A front slot starts its process again when it dies, gives up on one dying at start, and
starts none once the server stops."""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Callable

from modelhost.fronts.supervisor import MAX_QUICK_DEATHS, QUICK_DEATH_S, FrontSlot, exit_text
from modelhost.records.events import EventLog

LISTENS_THEN_EXITS = [sys.executable, "-c", "print('listening')"]
LISTENS_THEN_WAITS = [sys.executable, "-c", "print('listening', flush=True); input()"]


def slot_running(argv: list[str], events: EventLog, clock: Callable[[], float]) -> FrontSlot:
    slot = FrontSlot(1, [], events, clock=clock, backoff=lambda _: 0.0)
    slot.argv = argv
    return slot


def kinds(events: EventLog, kind: str) -> list[str]:
    return [event.reason for event in events.recent if event.kind == kind]


def test_a_front_dying_at_start_is_given_up_with_a_failure() -> None:
    async def run() -> EventLog:
        events = EventLog()
        slot = slot_running(LISTENS_THEN_EXITS, events, lambda: 0.0)
        await slot.start(b"")
        await asyncio.wait_for(slot.tend(None, lambda: b"", asyncio.Event()), 60)
        return events

    events = asyncio.run(run())
    assert kinds(events, "front_exit") == ["exit"] * MAX_QUICK_DEATHS
    assert len(kinds(events, "front_start")) == MAX_QUICK_DEATHS
    assert kinds(events, "failure") == ["front_dies_at_start"]


def test_a_front_that_served_a_while_is_started_again_however_often_it_dies() -> None:
    """Deaths long after each start are not deaths at start: the slot never gives up."""

    async def run() -> EventLog:
        events, stop = EventLog(), asyncio.Event()
        ticks = itertools.count(0.0, QUICK_DEATH_S)  # each death a long while after its start
        slot = slot_running(LISTENS_THEN_EXITS, events, lambda: next(ticks))

        def table() -> bytes:
            if len(kinds(events, "front_exit")) > MAX_QUICK_DEATHS:
                stop.set()
            return b""

        await slot.start(b"")
        await asyncio.wait_for(slot.tend(None, table, stop), 60)
        return events

    events = asyncio.run(run())
    assert len(kinds(events, "front_exit")) > MAX_QUICK_DEATHS
    assert kinds(events, "failure") == []


def test_a_front_ending_after_the_stop_is_not_started_again() -> None:
    async def run() -> EventLog:
        events, stop = EventLog(), asyncio.Event()
        slot = slot_running(LISTENS_THEN_WAITS, events, lambda: 0.0)
        await slot.start(b"")
        tending = asyncio.ensure_future(slot.tend(None, lambda: b"", stop))
        stop.set()
        assert slot.process is not None and slot.process.stdin is not None
        slot.process.stdin.close()  # as the server's stop closes it
        await asyncio.wait_for(tending, 60)
        return events

    events = asyncio.run(run())
    assert kinds(events, "front_exit") == [] and len(kinds(events, "front_start")) == 1


def test_an_exit_says_its_signal_or_its_code() -> None:
    assert [exit_text(code) for code in (-9, 3, -200)] == [
        "killed by SIGKILL",
        "exited with code 3",
        "killed by signal 200",
    ]
