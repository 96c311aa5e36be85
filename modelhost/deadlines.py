"""Deadlines for calls that share one timeout, kept by one timer instead of one per call.

With one timeout, keys fall due in the order added, so the timer waits for the oldest only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    """`on_expiry(key)` runs `timeout_s` after `add(key)` unless discarded first."""

    def __init__(
        self,
        timeout_s: float,
        on_expiry: Callable[[K], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.on_expiry = on_expiry
        self.clock = clock
        self._due: dict[K, float] = {}  # insertion order is due order
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._due)

    def add(self, key: K) -> None:
        self._due.pop(key, None)  # a re-added key goes to the back
        self._due[key] = self.clock() + self.timeout_s
        if self._timer is None:
            self._set_timer()

    def discard(self, key: K) -> None:
        self._due.pop(key, None)  # the timer stays; it will find nothing due

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _set_timer(self) -> None:
        oldest_due = next(iter(self._due.values()))
        delay_s = max(0.0, oldest_due - self.clock())
        self._timer = asyncio.get_running_loop().call_later(delay_s, self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self.clock()
        while self._due:
            key, due = next(iter(self._due.items()))
            if due > now:
                break
            del self._due[key]
            self.on_expiry(key)  # may add keys and so set the timer
        if self._due and self._timer is None:
            self._set_timer()
