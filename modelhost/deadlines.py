"""Deadlines for calls that share one timeout, kept by one timer instead of one per call.

With one timeout, keys fall due in the order added, so the timer waits for the oldest only.
"""

from __future__ import annotations

import asyncio
import functools
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
        on_empty: Callable[[], None] | None = None,
    ) -> None:
        self.timeout_s = timeout_s
        self.on_expiry = on_expiry
        self.clock = clock
        self.on_empty = on_empty  # once no key waits, after a discard or an expiry
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
        if self.on_empty is not None and not self._due:
            self.on_empty()

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
        elif self.on_empty is not None and not self._due:
            self.on_empty()


class DeadlineGroups(Generic[K]):
    """Deadlines of several timeouts: one `Deadlines`, so one timer, for each timeout in use.

    Most keys take the default timeout, whose group stays; another timeout's group (a model's
    own) is let go once no key waits on it.
    """

    def __init__(
        self,
        default_s: float,
        on_expiry: Callable[[K], None],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.default_s = default_s
        self.on_expiry = on_expiry
        self.clock = clock
        self._groups = {default_s: Deadlines(default_s, on_expiry, clock)}

    def __len__(self) -> int:
        return sum(len(group) for group in self._groups.values())

    def add(self, key: K, timeout_s: float | None = None) -> Deadlines[K]:
        """Add `key` under `timeout_s` (None: the default); the group it joined."""
        timeout_s = self.default_s if timeout_s is None else timeout_s
        group = self._groups.get(timeout_s)
        if group is None:
            group = Deadlines(timeout_s, self.on_expiry, self.clock)
            group.on_empty = functools.partial(self._let_go, group)
            self._groups[timeout_s] = group
        group.add(key)
        return group

    def discard(self, key: K, timeout_s: float | None = None) -> None:
        group = self._groups.get(self.default_s if timeout_s is None else timeout_s)
        if group is not None:
            group.discard(key)

    def timeouts_s(self) -> list[float]:
        """The timeouts with a group, the default first."""
        return list(self._groups)

    def expire_due(self) -> None:
        """Expire every key due now (what each group's timer does)."""
        for group in list(self._groups.values()):
            group._expire()

    def close(self) -> None:
        for group in self._groups.values():
            group.close()

    def _let_go(self, group: Deadlines[K]) -> None:
        """Drop an idle group, unless another has its timeout since (a stale holder's call)."""
        if self._groups.get(group.timeout_s) is group:
            del self._groups[group.timeout_s]
        group.close()
