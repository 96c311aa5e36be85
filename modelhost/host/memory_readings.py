"""The server's PSS, read at a bounded rate and folded into the memory tier as it is read.

Reading the PSS walks page tables, so callers share the reading in flight and a fresh one. A
reading is folded in when it completes, less what records released meanwhile, so a model gone
is not counted as baseline (docs/decisions.md, "The server's PSS is read at a bounded rate").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple

from modelhost.cache.memory import MemoryTier
from modelhost.records.memory import pss_bytes, total_pss_bytes, trim_heap
from modelhost.units import format_bytes

logger = logging.getLogger("modelhost.memory")

FRESH_S = 1.0  # also the memory watch's interval: the headroom learns a second's drift
TRIM_STEP_BYTES = 8 << 20  # the frontend's growth that a trim of its heap may give back


class PssReading(NamedTuple):
    total_bytes: int
    frontend_bytes: int


def split_pss_bytes(child_pids: Iterable[int]) -> PssReading:
    """The PSS of this (frontend) process and its children."""
    frontend = pss_bytes()
    return PssReading(frontend + total_pss_bytes(child_pids), frontend)


class ServerPss:
    """Reads the server's PSS, trimming the frontend's heap when it has grown since the last
    trim past its allowance: freed pages of large bodies would otherwise be charged to the
    models. Within the allowance no trim: it holds the heap's locks while it walks it."""

    def __init__(
        self, child_pids: Callable[[], Iterable[int]], allowance_bytes: Callable[[], int]
    ) -> None:
        self._child_pids, self._allowance_bytes = child_pids, allowance_bytes
        self._trimmed_bytes = pss_bytes()

    def __call__(self) -> PssReading:
        frontend = pss_bytes()
        grown = frontend >= self._trimmed_bytes + TRIM_STEP_BYTES
        if grown and frontend > self._allowance_bytes():
            trim_heap()
            frontend = self._trimmed_bytes = pss_bytes()
        self._trimmed_bytes = min(self._trimmed_bytes, frontend)
        return PssReading(frontend + total_pss_bytes(self._child_pids()), frontend)


class MemoryReadings:
    """The server's PSS, read on a thread (or inline) and shared."""

    def __init__(
        self,
        read: Callable[[], int | PssReading],
        memory: MemoryTier,
        off_loop: bool,
        clock: Callable[[], float] = time.monotonic,
        on_fall: Callable[[], None] = lambda: None,
    ) -> None:
        self._read, self._memory, self._off_loop, self._clock = read, memory, off_loop, clock
        self._on_fall = on_fall
        self.last_bytes = memory.budget.baseline_bytes
        self._taken_at = -FRESH_S
        self._in_flight: asyncio.Future[None] | None = None
        self._over_allowance = False

    async def observe(self) -> None:
        """Fold a reading no older than FRESH_S into the tier."""
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
        """Fold a reading into the tier, and wake loads waiting for room if the baseline fell;
        return the whole server's PSS."""
        before = self._memory.budget.baseline_bytes
        total_bytes = self._fold_into_tier(reading, released)
        if self._memory.budget.baseline_bytes < before:
            self._on_fall()  # a trim or a recycle gave memory back
        return total_bytes

    def _fold_into_tier(self, reading: int | PssReading, released: int) -> int:
        if not isinstance(reading, PssReading):
            self._memory.observe(reading, released)
            return reading
        self._memory.observe(reading.total_bytes, released, reading.frontend_bytes)
        self._warn_when_over_allowance()
        return reading.total_bytes

    def _warn_when_over_allowance(self) -> None:
        """Warn once each time the frontend passes its allowance."""
        budget = self._memory.budget
        excess = budget.frontend_excess_bytes
        if excess and not self._over_allowance:
            logger.warning(
                "the frontend uses %s, %s past its allowance: the models' room shrinks by as "
                "much; raise --frontend-memory-allowance (and --memory-budget with it)",
                format_bytes(budget.frontend_bytes),
                format_bytes(excess),
            )
        self._over_allowance = bool(excess)
