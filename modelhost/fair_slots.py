"""Slots handed to the tenants' waiters in weighted fair order as they free."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from modelhost.errors import DeadlineExceeded
from modelhost.fair import FairQueue, Ticket


class FairSlots:
    """At most `limit` run; the rest wait in their tenant's queue for a freed slot, which goes
    to the tenant the fair queue picks."""

    def __init__(
        self,
        limit: int,
        queue_size: int | None = None,  # None: unbounded
        wait_s: float | None = None,  # None: no limit
        clock: Callable[[], float] = time.monotonic,
        weight: Callable[[str], float] | None = None,
        cap: Callable[[str], int] | None = None,
    ) -> None:
        self.wait_s = wait_s
        self.queue: FairQueue[asyncio.Future[Ticket]] = FairQueue(
            queue_size, weight=weight, clock=clock, cap=cap, limit=limit, on_free=self._fill
        )
        # tried before `acquire`: a caller that finds a slot creates no coroutine
        self.take_free = self.queue.take_free
        # a holder ended, costing these ms (None: the time since it started)
        self.release: Callable[[Ticket, float | None], None] = self.queue.complete

    async def acquire(self, tenant: str) -> Ticket:
        """A slot for `tenant`, at once or when the fair queue picks it."""
        ticket = self.take_free(tenant)
        if ticket is not None:
            return ticket
        waiter: asyncio.Future[Ticket] = asyncio.get_running_loop().create_future()
        self.queue.push(tenant, waiter)
        self._fill()  # free slots wait only for capped tenants: this one may be uncapped
        wait_s, loop = self.wait_s, waiter.get_loop()
        timer = None if wait_s is None else loop.call_later(wait_s, self._expire, tenant, waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                self.queue.discard(tenant, waiter)
            else:  # granted as the caller left: pass the slot on
                self.queue.refund(waiter.result())
                self._fill()
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def expired(self, tenant: str) -> DeadlineExceeded:
        """What a waiter of `tenant` gets past `wait_s`."""
        return DeadlineExceeded(f"waited {self.wait_s:g} s for one of {self.queue.limit} slots")

    def _expire(self, tenant: str, waiter: asyncio.Future[Ticket]) -> None:
        if waiter.done():
            return
        self.queue.discard(tenant, waiter)
        waiter.set_exception(self.expired(tenant))

    def _fill(self) -> None:
        """Hand free slots to waiters, in fair order, while any may take one."""
        queue = self.queue
        while queue.waiting and queue.in_flight < queue.limit:
            if (picked := queue.pop()) is None:
                return  # all that wait are at their caps
            waiter, ticket = picked
            if waiter.done():  # its caller left while it waited
                queue.refund(ticket)
                continue
            waiter.set_result(ticket)
