"""Tasks under way, one per model: its load, the load of one more copy, its revalidation.

A task counts until it ends, not until its done-callback runs a turn of the loop later: code
that runs in between (a request arriving in the same turn) neither joins an ended task as if it
were still running nor awaits it again and again (awaiting an ended task returns without
yielding, so such a loop would hold the event loop for ever).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnderWay(Generic[T]):
    """The task under way for each model name, if any."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[T]] = {}

    def get(self, name: str) -> asyncio.Task[T] | None:
        task = self._tasks.get(name)
        return task if task is not None and not task.done() else None

    def __contains__(self, name: str) -> bool:
        return self.get(name) is not None

    def start(self, name: str, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        task = asyncio.ensure_future(work)
        self._tasks[name] = task
        task.add_done_callback(lambda ended: self._forget(name, ended))
        return task

    def _forget(self, name: str, ended: asyncio.Task[T]) -> None:
        if self._tasks.get(name) is ended:  # not a later task of the same model
            del self._tasks[name]
