"""The signal loads and unloads wait on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Changes:
    """Announces each change and the shutdown."""

    def __init__(self) -> None:
        self.closing = False  # draining: nothing new starts
        self._changed = asyncio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` holds, checking at each change."""
        while not condition():
            await self._changed.wait()

    async def next(self, timeout_s: float | None = None) -> None:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)

    def close(self) -> None:
        self.closing = True
