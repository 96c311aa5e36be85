"""Upkeep: the host's background loops, for as long as the server runs."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from modelhost.host.model_host import ModelHost

MEMORY_WATCH_INTERVAL_S = 1.0
REPLICA_WATCH_INTERVAL_S = 1.0


async def watch_memory(host: ModelHost) -> None:
    """Follow the server's real PSS: fold drift into the baseline, evict if over budget."""
    while True:
        await asyncio.sleep(MEMORY_WATCH_INTERVAL_S)
        await host.memory_readings.observe()
        await host.relieve_pressure()


async def watch_replicas(host: ModelHost) -> None:
    """Let go of the extra workers of models that no longer need them."""
    while True:
        await asyncio.sleep(REPLICA_WATCH_INTERVAL_S)
        await host.scale_in()


async def watch_idle(host: ModelHost, idle_s: float) -> None:
    """Unload models unused for `idle_s`, checking a few times within each such span."""
    while True:
        await asyncio.sleep(min(MEMORY_WATCH_INTERVAL_S, idle_s / 4))
        await host.unload_idle(idle_s)


@contextlib.asynccontextmanager
async def upkeep(host: ModelHost, idle_unload_s: float) -> AsyncIterator[None]:
    """Run the loops while the block runs; stop them when it ends."""
    loops = [watch_memory(host), watch_replicas(host)]
    if idle_unload_s:
        loops.append(watch_idle(host, idle_unload_s))
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
