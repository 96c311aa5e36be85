"""Weighted fair queueing across tenants, on the worker time their requests cost."""

from __future__ import annotations

import functools
import sys
import time
from collections import deque
from collections.abc import Callable, Collection, Mapping
from itertools import repeat
from typing import Generic, NamedTuple, TypeVar

from modelhost.errors import TenantQueueFull

T = TypeVar("T")
FIRST_ESTIMATE_MS = 1.0  # before any request has been measured
SMOOTHING = 0.2  # weight of the newest cost in a tenant's running mean
GAVE_WAY = " (its newest gave its place to another tenant's request)"


def make_room(held: Mapping[str, int], tenant: str) -> tuple[str | None, str]:
    """Longest queue drop by what each tenant `held`: whose newest makes room for `tenant`
    (None: refuse `tenant`), and the refusal's words."""
    most = max(held, key=held.__getitem__)
    holding = f", and tenant {most} holds {held[most]} of them"
    return (None if held.get(tenant, 0) >= held[most] else most), holding


class Ticket(NamedTuple):
    """One dispatched request: whose it was, what it was charged, and when it started."""

    tenant: str
    estimate_ms: float
    started: float | None  # None: a lone tenant's, never timed (its end is not charged)


# in C, unlike Ticket(...)
_ticket: Callable[[tuple[str, float, float | None]], Ticket] = functools.partial(
    tuple.__new__, Ticket
)


class FairStatistics(NamedTuple):
    """Requests waiting and requests running, by tenant."""

    waiting: dict[str, int]
    running: dict[str, int]


class FairQueue(Generic[T]):
    """Serves the tenants by weighted fair queueing on cost (VTC, Sheng et al., OSDI'24).

    Next is the backlogged tenant with the lowest counter (service over weight). Dispatch charges
    the tenant's mean; completion corrects it by the measured cost. A tenant back from idling is
    lifted to the lowest backlogged counter: idling earns no credit. A tenant alone is not
    charged; when a second arrives both start level.
    """

    def __init__(
        self,
        queue_size: int | None = None,
        weight: Callable[[str], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        cap: Callable[[str], int] | None = None,
        limit: int = sys.maxsize,
        on_free: Callable[[], None] | None = None,
    ) -> None:
        self.queue_size = queue_size  # of each tenant's queue; None: unbounded
        self.clock, self.limit = clock, limit  # limit: of all running
        self.on_free = on_free  # as a request ends while others wait
        self.weight = weight  # a tenant's; None: every tenant's is 1
        self.cap = cap  # a tenant's requests running at once (0: no cap); None: none has one
        self._queues: dict[str, deque[T]] = {}  # backlogged tenants only
        self._counters: dict[str, float] = {}
        self._means_ms: dict[str, float] = {}
        self._mean_ms = FIRST_ESTIMATE_MS  # of every tenant: a new tenant's first estimate
        self._running: dict[str, int] = {}  # not a Counter: its misses are Python calls
        self._floor = 0.0  # lowest backlogged counter; kept while none is backlogged
        self._alone: str | None = None  # the only tenant active, or the last while none is
        self.in_flight = 0  # dispatched and not ended: all the tenant alone's
        self._alone_ticket = Ticket("", 0.0, None)  # every ticket of the tenant alone
        self.waiting = 0  # in every queue

    def __len__(self) -> int:
        return self.waiting

    def full(self, tenant: str) -> bool:
        """Whether `tenant`'s queue has no room for another request."""
        size = self.queue_size
        return size is not None and len(self._queues.get(tenant, ())) >= size

    def check(self, tenant: str) -> None:
        """Refuse a request of `tenant` when its queue is full."""
        if self.full(tenant):
            raise TenantQueueFull(
                f"tenant {tenant or '(default)'} has {self.queue_size} requests waiting for the "
                f"server, the limit (job_queue_size) is {self.queue_size}; retry after a pause, "
                f"or raise --job-queue-size or {self._holding(tenant)}"
            )

    def _holding(self, tenant: str) -> str:
        """The setting holding `tenant` back, to raise: its own cap, or the server's slots."""
        if self.cap is not None and self.at_cap(tenant):
            return f"its max_concurrency ({self.cap(tenant)}) in the tenants file"
        return "--max-concurrency"

    def push(self, tenant: str, item: T) -> None:
        """Queue `item` for `tenant`, or refuse it when the tenant's queue is full."""
        if self.queue_size is not None:
            self.check(tenant)
        if tenant != self._alone:
            self._arrive(tenant)
        if tenant not in self._queues:
            # one still served was not idle: it keeps its count; one alone is counted at no cost
            if self._alone is None and tenant not in self._running:
                self._lift(tenant)
            self._queues[tenant] = deque()
        self._queues[tenant].append(item)
        self.waiting += 1

    def pop(self) -> tuple[T, Ticket] | None:
        """The next item in fair order and its ticket; None when nothing waits but for a cap."""
        picked = self.take()
        if picked is None:
            return None
        tenant, item = picked
        return item, self.dispatch(tenant)

    def take(self) -> tuple[str, T] | None:
        """The next item in fair order and its tenant, not yet charged (`dispatch` charges)."""
        tenant = self.next_tenant()
        return None if tenant is None else (tenant, self.take_from(tenant))

    def next_tenant(self) -> str | None:
        """The tenant whose item goes next; None when nothing waits but for a cap."""
        candidates: Collection[str] = self._queues if self.cap is None else self._uncapped()
        if len(candidates) == 1:
            return next(iter(candidates))
        if not candidates:  # none waits, or all at their caps
            return None
        # lowest counter, then fewest running, fewest waiting (a quiet tenant lifted level goes
        # first), first backlogged; in C. With two waiting none is alone: `_running` has all
        tenants = list(candidates)
        orders = zip(
            map(self._counters.get, tenants, repeat(self._floor)),
            map(self._running.get, tenants, repeat(0)),
            map(len, map(self._queues.__getitem__, tenants)),
            range(len(tenants)),
            strict=True,
        )
        return tenants[min(orders)[-1]]

    def first_of(self, tenant: str) -> T:
        """The item of `tenant`'s that would go next."""
        return self._queues[tenant][0]

    def last_of(self, tenant: str) -> T:
        """`tenant`'s newest item."""
        return self._queues[tenant][-1]

    def take_from(self, tenant: str) -> T:
        """`tenant`'s next item, which `next_tenant` named."""
        self._floor = max(self._floor, self._counters.get(tenant, self._floor))
        queue = self._queues[tenant]
        item = queue.popleft()
        self.waiting -= 1
        if not queue:
            del self._queues[tenant]
        return item

    def take_free(self, tenant: str) -> Ticket | None:
        """`dispatch` if a slot is free and nothing waiting may take it; else None."""
        if self.in_flight >= self.limit or (
            self.waiting if self.cap is None else self.at_cap(tenant)
        ):
            return None
        if tenant == self._alone:  # as `dispatch` does
            self.in_flight += 1
            return self._alone_ticket
        return self.dispatch(tenant)

    def dispatch(self, tenant: str) -> Ticket:
        """Charge `tenant` a request's estimated cost as it starts, queued or not."""
        if tenant != self._alone:
            self._arrive(tenant)  # before counting it
        self.in_flight += 1
        if self._alone is not None:
            return self._alone_ticket  # charged in full at its end, if contention began
        self._running[tenant] = self._running.get(tenant, 0) + 1
        estimate_ms = self._means_ms.get(tenant, self._mean_ms)
        self.charge(tenant, estimate_ms)
        return _ticket((tenant, estimate_ms, self.clock()))

    def complete(self, ticket: Ticket, cost_ms: float | None) -> None:
        """Correct the charge by the measured cost (None: the time since it started)."""
        self.in_flight -= 1
        if ticket.tenant != self._alone:  # else no one to be fair to
            self._correct(ticket, cost_ms)
        if self.waiting and self.on_free is not None:
            self.on_free()

    def _correct(self, ticket: Ticket, cost_ms: float | None) -> None:
        if cost_ms is None:
            started = ticket.started
            cost_ms = self._mean_ms if started is None else (self.clock() - started) * 1000
        tenant = ticket.tenant
        self.charge(tenant, cost_ms - ticket.estimate_ms)
        mean_ms = self._means_ms.get(tenant, cost_ms)
        self._means_ms[tenant] = mean_ms + SMOOTHING * (cost_ms - mean_ms)
        self._mean_ms += SMOOTHING * (cost_ms - self._mean_ms)
        self._end(tenant)

    def refund(self, ticket: Ticket) -> None:
        """Take back the charge of a request that never ran."""
        self.in_flight -= 1
        if ticket.tenant == self._alone:
            return
        self.charge(ticket.tenant, -ticket.estimate_ms)
        self._end(ticket.tenant)

    @property
    def backlogged(self) -> int:
        """How many tenants have items waiting."""
        return len(self._queues)

    def clear(self) -> None:
        """Drop every waiting item, which the caller holds elsewhere; the counters stay."""
        self._queues.clear()
        self.waiting = 0
        self._recount()

    def discard(self, tenant: str, item: T) -> bool:
        """Take `item` out of `tenant`'s queue; whether it was there."""
        queue = self._queues.get(tenant)
        if queue is None or item not in queue:
            return False
        queue.remove(item)
        self.waiting -= 1
        if not queue:
            del self._queues[tenant]
            if not self.running(tenant):
                self._recount()
        return True

    def at_cap(self, tenant: str) -> bool:
        """Whether `tenant` has as many requests running as its cap allows."""
        cap = self.cap(tenant) if self.cap is not None else 0
        return bool(cap) and self.running(tenant) >= cap

    def running(self, tenant: str) -> int:
        """How many of `tenant`'s requests run."""
        if tenant == self._alone:
            return self.in_flight
        return self._running.get(tenant, 0)

    def counter(self, tenant: str) -> float:
        """`tenant`'s service so far over its weight, as the queue counts it."""
        return self._counters.get(tenant, self._floor)

    def statistics(self) -> FairStatistics:
        waiting = {tenant: len(queue) for tenant, queue in self._queues.items()}
        running = dict(self._running)
        if self._alone is not None and self.in_flight:
            running[self._alone] = self.in_flight
        return FairStatistics(waiting, running)

    def _uncapped(self) -> list[str]:
        return [tenant for tenant in self._queues if not self.at_cap(tenant)]

    def _lift(self, tenant: str) -> None:
        """Start an idle tenant level with the lowest uncapped backlogged one (a capped
        tenant's counter lags, and would hand the newcomer a burst)."""
        others = self._queues if self.cap is None else self._uncapped()
        floor = self._floor
        lowest = min(map(self._counters.get, others, repeat(floor)), default=floor)
        self._counters[tenant] = max(self.counter(tenant), lowest)

    def _arrive(self, tenant: str) -> None:
        """`tenant` is about to run or wait: alone, or the start of contention."""
        if tenant in self._running or tenant in self._queues:
            return  # active already, beside others
        if not self.in_flight and not self._queues:
            return self._be_alone(tenant)  # after none, or after another alone went idle
        if self._alone is None:
            return
        # the time alone was no contention: both start level, neither owed nor owing
        first, self._alone = self._alone, None
        if self.in_flight:
            self._running[first] = self.in_flight
        self._floor = max(self._floor, self.counter(first))
        self._counters[first] = self._floor
        self._counters[tenant] = max(self.counter(tenant), self._floor)

    def _recount(self) -> None:
        """With one tenant or none left active, the one left is alone."""
        if self._alone is not None and self.in_flight:
            return  # the tenant alone runs: it is still alone
        active = self._running.keys() | self._queues.keys()
        if len(active) == 1:
            self._be_alone(next(iter(active)))
        elif not active:
            self._forget_alone()

    def _be_alone(self, tenant: str) -> None:
        if self._alone is not None and self._alone != tenant:
            self._forget_alone()
        self._alone = tenant
        self._running.pop(tenant, None)  # its requests are all that run: `in_flight`
        if self._alone_ticket.tenant != tenant:
            self._alone_ticket = Ticket(tenant, 0.0, None)

    def _forget_alone(self) -> None:
        """The idle tenant alone is alone no more."""
        if self._alone is not None:
            self._forget_if_owed_nothing(self._alone)
        self._alone = None

    def charge(self, tenant: str, cost_ms: float) -> None:
        """Count `cost_ms` of service to `tenant` (or a cost in the caller's own unit)."""
        if self.weight is not None:
            cost_ms /= self.weight(tenant)
        self._counters[tenant] = self._counters.get(tenant, self._floor) + cost_ms

    def _end(self, tenant: str) -> None:
        """One of `tenant`'s requests ended: forget a tenant idle and owed nothing."""
        running = self._running[tenant] - 1
        if running:
            self._running[tenant] = running
            return
        del self._running[tenant]
        if self._alone is None and len(self._running) + len(self._queues) <= 2:
            self._recount()
        self._forget_if_owed_nothing(tenant)

    def _forget_if_owed_nothing(self, tenant: str) -> None:
        if tenant not in self._queues and self._counters.get(tenant, self._floor) <= self._floor:
            # it would be lifted to the floor on its return: its counter carries nothing
            self._counters.pop(tenant, None)
            self._means_ms.pop(tenant, None)
