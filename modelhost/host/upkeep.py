"""The host's background loops; each outlives its errors, which it reports as events."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

from modelhost.host.idle import check_interval_s
from modelhost.host.memory_readings import FRESH_S
from modelhost.host.model_host import ModelHost

logger = logging.getLogger("modelhost.host")

MEMORY_WATCH_INTERVAL_S = FRESH_S  # each step takes a fresh reading
REPLICA_WATCH_INTERVAL_S = 1.0


async def watch_memory(host: ModelHost) -> None:
    """Follow the server's PSS and evict if over budget."""

    async def step() -> None:
        await host.memory_readings.observe()
        await host.residency.relieve_pressure()

    await repeat(host, "memory_watch", lambda: MEMORY_WATCH_INTERVAL_S, step)


async def watch_replicas(host: ModelHost) -> None:
    await repeat(host, "replica_watch", lambda: REPLICA_WATCH_INTERVAL_S, host.scaling.scale_in)


async def watch_idle(host: ModelHost, idle_s: float) -> None:
    """Unload models unused for their own idle_unload_s, else for `idle_s` (0: never)."""

    def interval_s() -> float:
        own_s = host.manifests.own_idle_s
        return check_interval_s(idle_s, own_s, MEMORY_WATCH_INTERVAL_S)

    await repeat(host, "idle_watch", interval_s, lambda: host.residency.unload_idle(idle_s))


async def repeat(
    host: ModelHost, name: str, interval_s: Callable[[], float], step: Callable[[], Awaitable[None]]
) -> None:
    """Run `step` every `interval_s()` seconds, whatever it raises."""
    failing = False
    while True:
        await asyncio.sleep(interval_s())
        try:
            await step()
        except Exception as error:  # noqa: BLE001  (reported; the loop goes on)
            if not failing:
                logger.exception("the %s loop failed; it goes on", name)
            host.events.emit("failure", reason=name, detail={"error": repr(error)})
            failing = True
        else:
            failing = False


@contextlib.asynccontextmanager
async def upkeep(host: ModelHost, idle_unload_s: float) -> AsyncIterator[None]:
    """Run the loops while the block runs."""
    # a model may set its own idle_unload_s whatever the server's
    loops = [watch_memory(host), watch_replicas(host), watch_idle(host, idle_unload_s)]
    tasks = [asyncio.ensure_future(loop) for loop in loops]
    try:
        yield
    finally:
        for task in tasks:
            task.cancel()
