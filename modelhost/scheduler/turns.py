"""With tenants on, a worker's batches in flight, handed to waiting models in fair order.

A worker runs batches first come, first served, so a noisy tenant's many models would fill
its pipe; here it takes `depth` batches a slot, and a model with no turn waits fairly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from modelhost.fair import FairQueue, Ticket

TURNS_PER_SLOT = 2  # one running, one in the pipe: the worker never waits for the frontend


class Waiting(Protocol):
    """A model's dispatcher, as a worker's turns see it."""

    def pump(self) -> None: ...


class WorkerTurns:
    """One worker's turns and the models waiting for one."""

    def __init__(
        self, limit: int, weight: Callable[[str], float] | None, tenant_of: Callable[[Any], str]
    ) -> None:
        self.tenant_of = tenant_of  # a queued request's tenant
        self.queue: FairQueue[Waiting] = FairQueue(weight=weight, limit=limit, on_free=self._offer)
        self.members: set[Waiting] = set()  # waiting for a turn
        # a turn for a batch whose oldest request is the tenant's, charged to it
        self.take: Callable[[str], Ticket] = self.queue.dispatch
        # a batch ended, costing these ms
        self.give_back: Callable[[Ticket, float], None] = self.queue.complete

    @property
    def open(self) -> bool:
        return self.queue.in_flight < self.queue.limit

    def wait(self, tenant: str, model: Waiting) -> None:
        if model not in self.members:
            self.members.add(model)
            self.queue.push(tenant, model)

    def _offer(self) -> None:
        """A freed turn to the models waiting, in fair order."""
        while self.members and self.open:
            self._next_waiting().pump()

    def _next_waiting(self) -> Waiting:
        """The waiting model the fair queue picks; its charge comes when its batch starts."""
        picked = self.queue.take()
        assert picked is not None  # a member waits in the queue, and the queue has no caps
        model = picked[1]
        self.members.discard(model)
        return model


class Turns:
    """The turns of every worker, by worker id."""

    def __init__(
        self,
        slots_per_worker: int,
        tenant_of: Callable[[Any], str],
        weight: Callable[[str], float] | None = None,
        depth: int = TURNS_PER_SLOT,
    ) -> None:
        self.limit = max(1, slots_per_worker * depth)
        self.tenant_of = tenant_of  # a queued request's tenant
        self.weight = weight  # the tenant's, as the tenants file gives it now; None: all 1
        self._workers: dict[int, WorkerTurns] = {}

    def of(self, worker_id: int) -> WorkerTurns:
        turns = self._workers.get(worker_id)
        if turns is None:
            turns = self._workers[worker_id] = WorkerTurns(self.limit, self.weight, self.tenant_of)
        return turns
