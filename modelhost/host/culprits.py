"""Which model kills its workers: each death's blame shared among what it ran (decisions.md,
"A model whose batches keep killing their workers is held back")."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable, Collection

from modelhost.errors import ModelLoadError, ModelNotLoaded
from modelhost.host.failed_loads import FailedLoads, Version
from modelhost.records.events import EventLog
from modelhost.workers.running import BATCH, Record

WINDOW_S = 60.0
HELD_AT = 2.0  # two deaths alone


class Culprits:
    """The deaths of the last `window_s`."""

    def __init__(self, window_s: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.window_s, self.clock = window_s, clock
        self._deaths: deque[tuple[float, frozenset[str], float]] = deque()  # when, who, share

    def died(self, batches: frozenset[str], loading: str = "") -> list[str]:
        """A worker died running these: the models now to hold back."""
        now = self.clock()
        while self._deaths and now - self._deaths[0][0] >= self.window_s:
            self._deaths.popleft()
        suspects = batches | {loading} if loading else batches
        if not suspects:
            return []
        self._deaths.append((now, suspects, 1 / len(suspects)))
        held = sorted(name for name in batches if self.blame(name) >= HELD_AT - 1e-9)
        if held:  # they run no more; the others' shares stay
            gone = frozenset(held)
            self._deaths = deque((at, names - gone, share) for at, names, share in self._deaths)
        return held

    def blame(self, name: str) -> float:
        """`name`'s share of the deaths."""
        return sum(share for _, names, share in self._deaths if name in names)


class HeldBack:
    """Refuses the culprits as failed loads, then unloads their copies."""

    def __init__(
        self,
        failed_loads: FailedLoads,
        events: EventLog,
        version_of: Callable[[str], Version],
        unload: Callable[[str], Awaitable[object]],
    ) -> None:
        self.failed_loads, self.events = failed_loads, events
        self.version_of, self.unload = version_of, unload
        self.culprits = Culprits()
        self._tasks: set[asyncio.Task[None]] = set()

    def died(self, ran: Record, hosted: Collection[str]) -> None:
        """A worker holding `hosted` died having run `ran`."""
        batches, loading = ran.batches.intersection(hosted), ran.loading
        if ran.crashed is not None:  # a fatal signal's thread: its batch or load alone
            kind, model = ran.crashed
            batches, loading = (batches & {model}, "") if kind == BATCH else (frozenset(), model)
        for name in self.culprits.died(batches, loading):
            message = self.failed_loads.hold_back(name, self.culprits.window_s)
            self.events.emit("failure", name, reason="held_back", detail={"error": message})
            task = asyncio.ensure_future(self._unload(name, ModelLoadError(message)))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _unload(self, name: str, error: ModelLoadError) -> None:
        with contextlib.suppress(ModelNotLoaded):
            await self.unload(name)
        await self.failed_loads.remember(name, self.version_of(name), error)
