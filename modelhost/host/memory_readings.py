"""The server's PSS, read at a bounded rate and folded into the memory tier as it is read.

Reading /proc/PID/smaps_rollup walks a process's page tables: about 4 ms for a worker holding
ten forests, three processes a reading. Under churn every miss asked for one before making room
(a fifth of the server's core went to it, `docs/performance.md`), so concurrent callers now share
the reading in flight, and a reading younger than `FRESH_S` serves every caller. Each reading is
folded into the tier (`MemoryTier.observe`) the moment it completes, against the records of that
moment, less what records gave back while it was read: a figure set against records that have
since shrunk would otherwise count a model gone as baseline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from modelhost.cache.memory import MemoryTier

FRESH_S = 0.25  # the memory watch reads every second; a miss may use a figure this old


class MemoryReadings:
    """The server's PSS, read on a thread (or inline, for a cheap reader) and shared."""

    def __init__(
        self,
        read: Callable[[], int],
        memory: MemoryTier,
        off_loop: bool,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read, self._memory, self._off_loop, self._clock = read, memory, off_loop, clock
        self.last_bytes = memory.baseline_bytes  # the latest reading (at first, the idle server's)
        self._taken_at = -FRESH_S
        self._in_flight: asyncio.Future[None] | None = None

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
            self._memory.observe(reading, released)
            self.last_bytes, self._taken_at = reading, started
        finally:
            self._in_flight = None
