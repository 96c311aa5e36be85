"""A stalled event loop is logged once a stall, with the line it is stuck on, and counted."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from modelhost.observe.loop_watch import LoopWatch


def spin_without_yielding(seconds: float) -> None:
    """What a bug in a coroutine does: runs on, never giving the loop back."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        pass


async def stall_twice(stalls: list[int]) -> None:
    watch = LoopWatch(asyncio.get_running_loop(), lambda: stalls.append(1), 0.5, 0.05)
    watch.start()
    try:
        await asyncio.sleep(0.2)  # a loop that runs is not reported
        assert not stalls
        spin_without_yielding(1.5)  # one stall, however long: one report
        await asyncio.sleep(0.5)
        spin_without_yielding(1.2)
        await asyncio.sleep(0.5)
    finally:
        watch.stop()


def test_stalled_loop_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stalled loop is logged with its stack once a stall."""
    stalls: list[int] = []
    with caplog.at_level(logging.ERROR, logger="modelhost.loop"):
        asyncio.run(stall_twice(stalls))
    assert stalls == [1, 1]
    reports = [r.getMessage() for r in caplog.records if r.name == "modelhost.loop"]
    assert len(reports) == 2
    assert "the event loop has not run for" in reports[0]
    assert "in spin_without_yielding" in reports[0] and "in stall_twice" in reports[0]
