"""Requests waiting for a model's load: bounded by model and, with tenants on, by tenant.

A refused request is told when the load should be done. With tenants on, a full model makes
room as its batch queue does.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator

from modelhost.errors import QueueFull, TenantQueueFull
from modelhost.fair import GAVE_WAY, make_room
from modelhost.host.calls import LoadOutcome

SMOOTHING = 0.2  # weight of the newest load in the running mean


class Waiter:
    """One request's wait for a load, which another tenant's request may take."""

    def __init__(self, tenant: str) -> None:
        self.tenant = tenant
        self._task: asyncio.Task[object] | None = None
        self._gave_way: QueueFull | None = None

    async def until(self, load: Awaitable[LoadOutcome]) -> LoadOutcome:
        """`load`'s result, or QueueFull if this waiter gave its place first."""
        self._task = asyncio.current_task()  # it pins the model in the step the load ends
        try:
            return await load
        except asyncio.CancelledError:
            if self._gave_way is None:
                raise
            getattr(self._task, "uncancel", lambda: 0)()  # Python 3.11 counts cancels
            raise self._gave_way from None

    def give_way(self, error: QueueFull) -> None:
        self._gave_way = error
        if self._task is not None:
            self._task.cancel()


class LoadWaits:
    """Who waits for which load, and how long loads take."""

    def __init__(self, limit: int, by_tenant: bool, clock: Callable[[], float]) -> None:
        self.limit, self.by_tenant, self.clock = limit, by_tenant, clock
        self._models: dict[str, list[Waiter]] = {}  # in the order they came
        self._tenants: Counter[str] = Counter()
        self._since: dict[str, float] = {}  # when the model's first waiter came
        self._mean_s: float | None = None

    @contextlib.contextmanager
    def waiting(self, name: str, tenant: str) -> Iterator[Waiter]:
        """One request waits for `name`'s load, or is refused when too many already do."""
        self._check(name, tenant)
        self._since.setdefault(name, self.clock())
        waiter = Waiter(tenant)
        self._models.setdefault(name, []).append(waiter)
        self._tenants[tenant] += 1
        try:
            yield waiter
        finally:
            self._leave(name, waiter)

    def loaded(self, outcome: LoadOutcome) -> None:
        """A load ended that requests waited for: learn how long loads take."""
        seconds = (outcome.download_ms + outcome.load_ms) / 1000
        mean = self._mean_s
        self._mean_s = seconds if mean is None else mean + SMOOTHING * (seconds - mean)

    def retry_after_s(self, name: str) -> int:
        """Whole seconds until `name`'s load should be done; at least one."""
        if self._mean_s is None:
            return 1
        ran_s = self.clock() - self._since[name] if name in self._since else 0.0
        return max(1, math.ceil(self._mean_s - ran_s))

    def _check(self, name: str, tenant: str) -> None:
        if self.by_tenant and self._tenants[tenant] >= self.limit:
            raise self._timed(
                TenantQueueFull(
                    f"tenant {tenant} has {self._tenants[tenant]} requests waiting for models "
                    f"to load, the limit (job_queue_size) is {self.limit}; retry once they have "
                    "loaded, or raise --job-queue-size"
                ),
                name,
            )
        waiters = self._models.get(name, ())
        if len(waiters) < self.limit:
            return
        if not self.by_tenant:
            raise self._full(name)
        most, holding = make_room(Counter(waiter.tenant for waiter in waiters), tenant)
        if most is None:
            raise self._full(name, holding)
        newest = next(waiter for waiter in reversed(waiters) if waiter.tenant == most)
        newest.give_way(self._full(name, holding + GAVE_WAY))
        self._leave(name, newest)

    def _full(self, name: str, holding: str = "") -> QueueFull:
        return self._timed(
            QueueFull(
                f"model {name} is loading and {len(self._models[name])} requests wait for its "
                f"load, the limit (job_queue_size) is {self.limit}{holding}; retry once it has "
                "loaded, or raise --job-queue-size"
            ),
            name,
        )

    def _timed(self, error: QueueFull, name: str) -> QueueFull:
        error.retry_after_s = self.retry_after_s(name)
        return error

    def _leave(self, name: str, waiter: Waiter) -> None:
        waiters = self._models.get(name, [])
        if waiter not in waiters:  # it gave way, and left then
            return
        waiters.remove(waiter)
        self._tenants[waiter.tenant] -= 1
        if not self._tenants[waiter.tenant]:
            del self._tenants[waiter.tenant]
        if not waiters:
            del self._models[name], self._since[name]
