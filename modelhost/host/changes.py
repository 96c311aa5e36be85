"""The signal the host's parts share: something changed that a load or an unload may wait on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable


class Changes:
    """Announces each change (a worker freed, a record dropped, a copy gone) and the shutdown."""

    def __init__(self) -> None:
        self.closing = False  # the server drains: no request, load or copy starts
        self._changed = asyncio.Event()

    def notify(self) -> None:
        """Something changed that a waiting load or unload may be waiting for."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` holds, looking again at each change `notify` announces."""
        while not condition():
            await self._changed.wait()

    async def next(self, timeout_s: float | None = None) -> None:
        """Wait for the next change, or `timeout_s` at most."""
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout_s)

    def close(self) -> None:
        """Refuse new requests from now on (the server is draining)."""
        self.closing = True
