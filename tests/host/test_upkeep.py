"""The upkeep loops outlive their own errors: each failure is logged and counted, and the loop
goes on (a `/proc` read failing under a burst of connections once ended the memory watch)."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace
from typing import Any

import pytest

from modelhost.host import upkeep
from modelhost.records.events import EventLog


class FlakyHost:
    """The parts of a ModelHost the loops call; the memory reading fails `failures` times."""

    def __init__(self, failures: int) -> None:
        self.events = EventLog()
        self.failures_left = failures
        self.relieved = self.scaled_in = 0
        self.memory_readings = SimpleNamespace(observe=self.observe)
        self.residency = SimpleNamespace(
            relieve_pressure=self.relieve_pressure, unload_idle=self.unload_idle
        )
        self.scaling = SimpleNamespace(scale_in=self.scale_in)
        self.manifests = SimpleNamespace(own_idle_s={})

    async def observe(self) -> None:
        if self.failures_left:
            self.failures_left -= 1
            raise OSError(24, "Too many open files")

    async def relieve_pressure(self) -> None:
        self.relieved += 1

    async def scale_in(self) -> None:
        self.scaled_in += 1

    async def unload_idle(self, idle_s: float) -> None:
        pass


def run_upkeep(host: Any, seconds: float) -> None:
    async def main() -> None:
        async with upkeep.upkeep(host, idle_unload_s=0):
            await asyncio.sleep(seconds)

    asyncio.run(main())


@pytest.fixture(autouse=True)
def fast_loops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(upkeep, "MEMORY_WATCH_INTERVAL_S", 0.01)
    monkeypatch.setattr(upkeep, "REPLICA_WATCH_INTERVAL_S", 0.01)


def test_the_memory_watch_goes_on_after_its_reading_fails(caplog: pytest.LogCaptureFixture) -> None:
    host = FlakyHost(failures=3)
    with caplog.at_level(logging.INFO):
        run_upkeep(host, 0.5)
    assert host.relieved > 0  # it read the memory again, and relieved the pressure
    failures = [e for e in host.events.recent if e.kind == "failure"]
    assert [e.reason for e in failures] == ["memory_watch"] * 3
    assert "Too many open files" in failures[0].detail["error"]
    tracebacks = [r for r in caplog.records if r.exc_info]
    assert len(tracebacks) == 1  # the first of a run of failures; the rest are events only


def test_a_failing_loop_leaves_the_other_loops_running() -> None:
    host = FlakyHost(failures=10**9)
    run_upkeep(host, 0.3)
    assert host.scaled_in > 5 and host.relieved == 0
