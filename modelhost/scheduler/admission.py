"""The server's concurrency slots, handed to the tenants' waiting requests in fair order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from modelhost.errors import DeadlineExceeded
from modelhost.fair import FairQueue, Ticket
from modelhost.scheduler import TenantPolicyView
from modelhost.scheduler.rates import TenantRates


class FairAdmission:
    """At most `limit` requests run; the rest wait in their tenant's queue for a freed slot,
    which goes to the tenant the fair queue picks. `policies` (the tenants file's, read at each
    use) give each tenant a weight, a rate and a cap, which holds even while slots are free.
    """

    def __init__(
        self,
        limit: int,
        queue_size: int,
        wait_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        policies: Callable[[], TenantPolicyView] | None = None,
    ) -> None:
        self.wait_s = wait_s
        self.rates = None if policies is None else TenantRates(lambda t: policies().of(t), clock)
        self.queue: FairQueue[asyncio.Future[Ticket]] = (
            FairQueue(queue_size, clock=clock, limit=limit, on_free=self._fill)
            if policies is None
            else FairQueue(
                queue_size,
                weight=lambda tenant: policies().of(tenant).weight,
                clock=clock,
                cap=lambda tenant: policies().of(tenant).max_concurrency,
                limit=limit,
                on_free=self._fill,
            )
        )
        # tried before `acquire`: a request that finds a slot creates no coroutine
        self.take_free = self.queue.take_free
        # a request ended, costing these ms (None: unmeasured)
        self.release: Callable[[Ticket, float | None], None] = self.queue.complete
        # refuses what its tenant's full queue or rate would
        self.check: Callable[[str], None] = (
            self.check_slots if self.rates is None else self._check_policies
        )

    def check_slots(self, tenant: str) -> None:
        """Refuse what a full tenant queue would, every slot taken."""
        queue = self.queue
        if queue.in_flight >= queue.limit:
            queue.check(tenant)

    def _check_policies(self, tenant: str) -> None:
        """A tenant at its cap waits, so its full queue refuses too; then its rate."""
        self.check_slots(tenant)
        if self.queue.at_cap(tenant):
            self.queue.check(tenant)
        assert self.rates is not None
        self.rates.take(tenant)

    async def acquire(self, tenant: str) -> Ticket:
        """A slot for one of `tenant`'s requests, at once or when the fair queue picks it."""
        ticket = self.take_free(tenant)
        if ticket is not None:
            return ticket
        waiter: asyncio.Future[Ticket] = asyncio.get_running_loop().create_future()
        self.queue.push(tenant, waiter)
        self._fill()  # free slots wait only for capped tenants: this one may be uncapped
        timer = waiter.get_loop().call_later(self.wait_s, self._expire, tenant, waiter)
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
            timer.cancel()

    def refill(self) -> None:
        """The policies changed: a raised cap lets waiting requests run now."""
        if self.queue.waiting:
            self._fill()

    def _expire(self, tenant: str, waiter: asyncio.Future[Ticket]) -> None:
        if waiter.done():
            return
        self.queue.discard(tenant, waiter)
        waited = f"tenant {tenant or '(default)'}'s request waited {self.wait_s:g} s"
        if self.queue.at_cap(tenant):
            message = (
                f"{waited} (default_response_timeout) while the tenant had its "
                f"max_concurrency of {self.queue.running(tenant)} requests running "
                "(the tenants file); retry after a pause, or raise its max_concurrency"
            )
        else:
            message = (
                f"{waited} (default_response_timeout) for one of the server's {self.queue.limit} "
                "slots (max_concurrency) and got none; retry after a pause, or raise "
                "--max-concurrency or --default-response-timeout-s"
            )
        waiter.set_exception(DeadlineExceeded(message))

    def _fill(self) -> None:
        """Hand free slots to waiting requests, in fair order, while any may take one."""
        queue = self.queue
        while queue.waiting and queue.in_flight < queue.limit:
            if (picked := queue.pop()) is None:
                return  # all that wait are at their caps
            waiter, ticket = picked
            if waiter.done():  # its caller left while it waited
                queue.refund(ticket)
                continue
            waiter.set_result(ticket)
