"""Streams waiting for their first message on every connection of an h2corn port together, as
the guard's StreamBudget counts them for the other fronts (rpc/frames.py).

Past the budget, the connection holding the most waiting streams has them ended with
RESOURCE_EXHAUSTED, so that a client that sends its messages is not the one shed; a newcomer
whose own connection holds the most is refused instead. The app cannot end a connection, so it
ends the streams, which is what holds their memory.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Hashable, Iterator

import grpc

from modelhost.rpc.wire import Aborted

SHED = "shed: its connection held the most streams without a message"


class WaitingStreams:
    def __init__(self, most: int) -> None:
        self.most = most
        self.count = 0
        self.held: dict[Hashable, set[asyncio.Task[object]]] = {}

    @contextlib.contextmanager
    def waiting(self, connection: Hashable) -> Iterator[None]:
        """The block waits for a stream's first message on `connection`, counted."""
        if self.count >= self.most:
            self._shed(connection)
        task = asyncio.current_task()
        assert task is not None
        self.held.setdefault(connection, set()).add(task)
        self.count += 1
        try:
            yield
        except asyncio.CancelledError as cancelled:
            if cancelled.args != (SHED,):
                raise
            task.uncancel()
            raise self._refusal() from None
        finally:
            self._forget(connection, task)

    def _shed(self, newcomer: Hashable) -> None:
        """Ends the waiting streams of the connection holding the most; raises if that is the
        newcomer's own."""
        hog = max(self.held, key=lambda connection: len(self.held[connection]))
        if len(self.held[hog]) <= len(self.held.get(newcomer, ())):
            raise self._refusal()
        streams = self.held.pop(hog)
        self.count -= len(streams)
        for task in streams:
            task.cancel(SHED)

    def _forget(self, connection: Hashable, task: asyncio.Task[object]) -> None:
        streams = self.held.get(connection)
        if streams is None or task not in streams:
            return  # shed: already forgotten
        streams.discard(task)
        self.count -= 1
        if not streams:
            del self.held[connection]

    def _refusal(self) -> Aborted:
        message = f"more than {self.most} streams without a message on the port"
        return Aborted(grpc.StatusCode.RESOURCE_EXHAUSTED, message)
