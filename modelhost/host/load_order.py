"""Loads take free workers in the tenants' weighted fair order, as requests take slots."""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterator

from modelhost.fair import FairQueue, Ticket


class Place:
    """One load waiting for a worker."""

    __slots__ = ("name", "taken")

    def __init__(self, name: str) -> None:
        self.name, self.taken = name, False


class LoadOrder:
    """Loads waiting for a worker; a tenant is charged the time its loads hold workers."""

    def __init__(
        self,
        weight: Callable[[str], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._queue: FairQueue[Place] = FairQueue(weight=weight, clock=clock)
        self._tickets: dict[int, Ticket] = {}  # by the worker its load holds
        self._models: Counter[str] = Counter()  # the models waiting

    @property
    def waiting(self) -> int:
        return self._queue.waiting

    @contextlib.contextmanager
    def waiting_for(self, tenant: str, name: str) -> Iterator[Place]:
        """`name`'s load, queued until it takes a worker or gives up."""
        place = Place(name)
        self._queue.push(tenant, place)
        self._models[name] += 1
        try:
            yield place
        finally:
            if not place.taken:
                self._queue.discard(tenant, place)
            self._models[name] -= 1
            if not self._models[name]:
                del self._models[name]

    def wanted(self, can_load: Callable[[str], bool]) -> bool:
        """Whether a waiting load could take a free worker now."""
        return any(can_load(name) for name in self._models)

    def may_go(self, place: Place, can_load: Callable[[str], bool]) -> bool:
        """Whether `place` goes next, or the load that does can use no free worker."""
        head = self._queue.first_of(self._queue.next_tenant() or "")
        return head is place or not can_load(head.name)

    def took(self, tenant: str, place: Place, worker_id: int) -> None:
        """Its tenant is charged until `released`."""
        if self._queue.first_of(tenant) is place:
            self._queue.take_from(tenant)
        else:
            self._queue.discard(tenant, place)
        place.taken = True
        self._tickets[worker_id] = self._queue.dispatch(tenant)

    def released(self, worker_id: int) -> None:
        ticket = self._tickets.pop(worker_id, None)
        if ticket is not None:
            self._queue.complete(ticket, None)
