"""The signal loads and unloads wait on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable


class Changes:
    """Announces each change and the shutdown."""

    def __init__(self) -> None:
        self.closing = False  # draining: nothing new starts
        self._changed = asyncio.Event()
        self._waiting = 0  # told on every idle request: with none waiting there is no one to wake

    def notify(self) -> None:
        if self._waiting:
            self._changed.set()
            self._changed = asyncio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` holds, checking at each change."""
        while not condition():
            await self._wait(self._changed.wait())

    async def next(self, timeout_s: float | None = None) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await self._wait(asyncio.wait_for(self._changed.wait(), timeout_s))

    async def _wait(self, change: Awaitable[object]) -> None:
        self._waiting += 1
        try:
            await change
        finally:
            self._waiting -= 1

    def close(self) -> None:
        self.closing = True
