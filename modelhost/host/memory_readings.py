"""The server's PSS, read at a bounded rate and folded into the memory tier as it is read.

Reading /proc/PID/smaps_rollup walks a process's page tables: about 4 ms for a worker holding
ten forests, three processes a reading. Under churn every miss asked for one before making room
(a fifth of the server's core went to it, `docs/performance.md`), so concurrent callers now share
the reading in flight, and a reading younger than `FRESH_S` serves every caller. Each reading is
folded into the tier (`MemoryTier.observe`) the moment it completes, against the records of that
moment, less what records gave back while it was read: a figure set against records that have
since shrunk would otherwise count a model gone as baseline. A reading says the frontend's share
apart (`PssReading`), which the tier charges at the allowance the frontend was given at start.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from modelhost.cache.memory import MemoryTier
from modelhost.records.memory import pss_bytes, total_pss_bytes
from modelhost.units import format_bytes

logger = logging.getLogger("modelhost.memory")

FRESH_S = 0.25  # the memory watch reads every second; a miss may use a figure this old


class PssReading(NamedTuple):
    """The whole server's PSS, and the frontend's share of it."""

    total_bytes: int
    frontend_bytes: int


def split_pss_bytes(child_pids: Iterable[int]) -> PssReading:
    """The server's PSS: this (frontend) process, and the given children with it."""
    frontend = pss_bytes()
    return PssReading(frontend + total_pss_bytes(child_pids), frontend)


class MemoryReadings:
    """The server's PSS, read on a thread (or inline, for a cheap reader) and shared."""

    def __init__(
        self,
        read: Callable[[], int | PssReading],
        memory: MemoryTier,
        off_loop: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._memory, self._off_loop, self._clock = read, memory, off_loop, clock
        self.last_bytes = memory.baseline_bytes  # the latest reading (at first, the idle server's)
        self._taken_at = -FRESH_S
        self._in_flight: asyncio.Future[None] | None = None
        self._over_allowance = False

    async def observe(self) -> None:
        """Fold a reading no older than FRESH_S into the memory tier, taking one if needed."""
        if self._clock() - self._taken_at < FRESH_S:
            return
        if self._in_flight is None:
            self._in_flight = asyncio.ensure_future(self._take())
        await asyncio.shield(self._in_flight)

    async def _take(self) -> None:
        started, released = self._clock(), self._memory.released_bytes
        try:
            reading = await asyncio.to_thread(self._read) if self._off_loop else self._read()
            self.last_bytes, self._taken_at = self._fold(reading, released), started
        finally:
            self._in_flight = None

    def _fold(self, reading: int | PssReading, released: int) -> int:
        """Fold a reading into the memory tier; the whole server's PSS."""
        if not isinstance(reading, PssReading):
            self._memory.observe(reading, released)
            return reading
        self._memory.observe(reading.total_bytes, released, reading.frontend_bytes)
        self._warn_when_over_allowance()
        return reading.total_bytes

    def _warn_when_over_allowance(self) -> None:
        """Say once each time the frontend passes its allowance: models lose that room."""
        excess = self._memory.frontend_excess_bytes
        if excess and not self._over_allowance:
            logger.warning(
                "the frontend uses %s, %s past its allowance: the models' room shrinks by as "
                "much; raise --frontend-memory-allowance (and --memory-budget with it)",
                format_bytes(self._memory.frontend_bytes),
                format_bytes(excess),
            )
        self._over_allowance = bool(excess)
