"""Streams waiting for their first message on an h2corn port, counted as the guard's
StreamBudget counts them (rpc/frames.py).

One waiting past `wait_s` ends with DEADLINE_EXCEEDED, found by a sweep. Past the budget, the
connection holding the most has its waiting streams ended (RESOURCE_EXHAUSTED), or the newcomer
is refused if its own holds the most: the app cannot end a connection.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine, Hashable
from typing import Any, TypeVar

import grpc

from modelhost.rpc.wire import Aborted

SHED = "shed: its connection held the most streams without a message"
LATE = "no message in time"
T = TypeVar("T")
SWEEPS = 4  # within wait_s: a stream is ended between wait_s and 1.25 times it


class WaitingStreams:
    def __init__(
        self, most: int, wait_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.most, self.wait_s, self.clock = most, wait_s, clock
        self.count = 0
        self.held: dict[Hashable, set[asyncio.Task[object]]] = {}
        self.since: dict[asyncio.Task[object], float] = {}
        self.sweeper: asyncio.Task[None] | None = None

    async def read(self, connection: Hashable, reading: Coroutine[Any, Any, T]) -> T:
        """`reading`, a stream's first message on `connection`, awaited counted and timed (a
        coroutine, not a context manager: it is on every call's path, and costs less)."""
        if self.count >= self.most:
            try:
                self._shed(connection)
            except Aborted:
                reading.close()  # refused: never to be awaited
                raise
        task = asyncio.current_task()
        assert task is not None
        self.held.setdefault(connection, set()).add(task)
        self.count += 1
        self.since[task] = self.clock()
        if self.sweeper is None or self.sweeper.done():
            self.sweeper = asyncio.ensure_future(self._sweep())
        try:
            return await reading
        except asyncio.CancelledError as cancelled:
            if cancelled.args not in ((SHED,), (LATE,)):
                raise
            task.uncancel()
            raise self._refusal(cancelled.args[0]) from None
        finally:
            self.since.pop(task, None)
            self._forget(connection, task)

    async def _sweep(self) -> None:
        """Ends the streams waiting past `wait_s`, until none waits."""
        while self.since:
            await asyncio.sleep(self.wait_s / SWEEPS)
            oldest = self.clock() - self.wait_s
            for task in [task for task, since in self.since.items() if since <= oldest]:
                del self.since[task]
                task.cancel(LATE)

    def _shed(self, newcomer: Hashable) -> None:
        """Ends the waiting streams of the connection holding the most, or refuses."""
        hog = max(self.held, key=lambda connection: len(self.held[connection]))
        if len(self.held[hog]) <= len(self.held.get(newcomer, ())):
            raise self._refusal(SHED)
        streams = self.held.pop(hog)
        self.count -= len(streams)
        for task in streams:
            self.since.pop(task, None)
            task.cancel(SHED)

    def _forget(self, connection: Hashable, task: asyncio.Task[object]) -> None:
        streams = self.held.get(connection)
        if streams is None or task not in streams:
            return  # shed: already forgotten
        streams.discard(task)
        self.count -= 1
        if not streams:
            del self.held[connection]

    def _refusal(self, reason: str) -> Aborted:
        if reason == LATE:
            return Aborted(grpc.StatusCode.DEADLINE_EXCEEDED, LATE)
        message = f"more than {self.most} streams without a message on the port"
        return Aborted(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
