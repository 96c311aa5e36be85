"""The server's concurrency slots, handed to the tenants' waiting requests in fair order."""

from __future__ import annotations

import time
from collections.abc import Callable

from modelhost.errors import DeadlineExceeded
from modelhost.fair_slots import FairSlots
from modelhost.scheduler import TenantPolicyView
from modelhost.scheduler.rates import TenantRates


class FairAdmission(FairSlots):
    """The server's slots. `policies` (the tenants file's, read at each use) give each tenant a
    weight, a rate and a cap, which holds even while slots are free.
    """

    def __init__(
        self,
        limit: int,
        queue_size: int,
        wait_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        policies: Callable[[], TenantPolicyView] | None = None,
    ) -> None:
        self.rates = None if policies is None else TenantRates(lambda t: policies().of(t), clock)
        super().__init__(
            limit,
            queue_size,
            wait_s,
            clock,
            weight=None if policies is None else lambda tenant: policies().of(tenant).weight,
            cap=None if policies is None else lambda tenant: policies().of(tenant).max_concurrency,
        )
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

    def refill(self) -> None:
        """The policies changed: a raised cap lets waiting requests run now."""
        if self.queue.waiting:
            self._fill()

    def expired(self, tenant: str) -> DeadlineExceeded:
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
        return DeadlineExceeded(message)
