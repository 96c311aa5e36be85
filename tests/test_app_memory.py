"""The composition root says at start what the frontend may use and leaves models the rest."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from modelhost.app import memory_tier
from modelhost.config import load_config
from modelhost.config.budgets import memory_budget_bytes
from modelhost.errors import ConfigError
from modelhost.host.memory_readings import PssReading
from modelhost.records.events import EventLog
from modelhost.workers.pool import WorkerPool

MiB = 2**20
POOL = SimpleNamespace(workers={0: None, 1: None})  # two workers, as memory_tier counts them


def test_frontend_allowance_is_paid_for(tmp_path: Path) -> None:
    """The frontend allowance is paid for beside the idle server."""
    flags = {"memory_budget": "1GiB", "frontend_memory_allowance": "32MiB"}
    config = load_config(flags, {}, tmp_path)
    memory = memory_tier(config, POOL, PssReading(300 * MiB, 60 * MiB), memory_budget_bytes(config))  # type: ignore[arg-type]
    assert memory.budget.frontend is not None and memory.budget.frontend.bytes == (60 + 32) * MiB
    assert memory.budget.baseline_bytes == (300 + 32) * MiB
    room = memory.budget.capacity_bytes
    memory.observe((240 + 90) * MiB, 0, frontend_bytes=90 * MiB)  # grown within: no room lost
    assert memory.budget.capacity_bytes == room


def test_unaffordable_allowance_is_refused(tmp_path: Path) -> None:
    """An allowance the budget cannot pay for is refused naming it."""
    flags = {"memory_budget": "400MiB", "frontend_memory_allowance": "200MiB"}
    config = load_config(flags, {}, tmp_path)
    with pytest.raises(ConfigError, match="--frontend-memory-allowance"):
        memory_tier(config, POOL, PssReading(300 * MiB, 60 * MiB), memory_budget_bytes(config))  # type: ignore[arg-type]


def anon_pss_bytes(pids: list[int]) -> int:
    """The PSS of the pages these processes allocated, without the files they map."""
    total_kib = 0
    for pid in pids:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
        total_kib += sum(
            int(line.split()[1]) for line in rollup.splitlines() if line.startswith("Pss_Anon:")
        )
    return total_kib * 1024


def test_the_idle_reading_at_start_is_already_settled(tmp_path: Path) -> None:
    """Workers say hello once rehearsed, so the baseline read at once holds a second later.

    Their allocations are compared: the libraries' file pages are shared with any process on
    the machine mapping the same files, so their share moves as those come and go."""

    async def readings() -> tuple[int, int]:
        pool = WorkerPool(2, 1, tmp_path, EventLog(), ("sklearn",))
        await pool.startup()
        try:
            at_start = anon_pss_bytes(pool.pids())  # as the server reads it at start
            await asyncio.sleep(1.0)
            return at_start, anon_pss_bytes(pool.pids())
        finally:
            await pool.shutdown()

    at_start, later = asyncio.run(readings())
    assert abs(later - at_start) < at_start / 100
