"""The response deadlines of a front's requests in flight, kept in the order set by one timer
that waits for the first only; a timeout lowered meanwhile has every deadline looked at."""

from __future__ import annotations

import asyncio
import itertools
import math
from collections.abc import Callable

Expire = Callable[[], None]


class Deadlines:
    """Calls `expire()` for a request still pending at its deadline."""

    def __init__(self) -> None:
        self.pending: dict[int, tuple[float, Expire]] = {}
        self.keys = itertools.count()
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = math.inf  # loop time the timer fires at
        self.last_at = -math.inf  # the deadline set last
        self.ordered = True  # the pending deadlines are in the order they were set

    def add(self, timeout_s: float, expire: Expire) -> int:
        """A key for `remove`: `expire()` runs `timeout_s` from now unless removed first."""
        loop = asyncio.get_running_loop()
        at = loop.time() + timeout_s
        key = next(self.keys)
        self.pending[key] = (at, expire)
        if at < self.last_at:
            self.ordered = False
        self.last_at = at
        if at < self.timer_at:
            self._arm(loop, at)
        return key

    def remove(self, key: int) -> None:
        self.pending.pop(key, None)

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer_at = at
        self.timer = loop.call_at(at, self._fire)

    def _fire(self) -> None:
        """Expire what is due, and wait for the next deadline."""
        loop = asyncio.get_running_loop()
        self.timer, self.timer_at = None, math.inf
        now, next_at, due = loop.time(), math.inf, []
        for key, (at, _) in self.pending.items():
            if at <= now:
                due.append(key)
            else:
                next_at = min(next_at, at)
                if self.ordered:
                    break
        for key in due:
            _, expire = self.pending.pop(key)
            expire()
        if not self.pending:
            self.ordered, self.last_at = True, -math.inf
        elif next_at < math.inf:
            self._arm(loop, next_at)
