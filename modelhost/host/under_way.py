"""The task under way for each model: its load, one more copy, its revalidation.

A task counts until it ends, not until its done-callback runs a turn later. Otherwise a loop
awaiting an ended task would never yield and hold the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnderWay(Generic[T]):
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
        if self._tasks.get(name) is ended:  # not a later task of the model
            del self._tasks[name]
