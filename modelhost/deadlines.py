"""Deadlines for many calls that share one timeout, kept by one timer instead of one per call.

Every key waits the same `timeout_s`, so the order keys were added in is the order they are due
in: the timer is set for the oldest key only, and when it fires it expires every key that is due
and is set again for the next one. Adding and removing a key is a dict operation; a timer is
made only when the dict was empty or the oldest key expired (once per timeout, not per call).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class Deadlines(Generic[K]):
    """`on_expiry(key)` runs `timeout_s` after `add(key)`, unless `discard(key)` came first."""

    def __init__(
        self,
        timeout_s: float,
        on_expiry: Callable[[K], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.on_expiry = on_expiry
        self.clock = clock
        self._due: dict[K, float] = {}  # in the order added: the order they fall due
        self._timer: asyncio.TimerHandle | None = None

    def __len__(self) -> int:
        return len(self._due)

    def add(self, key: K) -> None:
        self._due.pop(key, None)  # a key added again goes to the back, where its due time is
        self._due[key] = self.clock() + self.timeout_s
        if self._timer is None:
            self._set_timer()

    def discard(self, key: K) -> None:
        self._due.pop(key, None)  # the timer stays set: when it fires it finds nothing due

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
            self.on_expiry(key)  # which may add keys, and so set the timer
        if self._due and self._timer is None:
            self._set_timer()
