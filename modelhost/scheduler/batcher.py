"""A model's bounded queue of waiting requests, and the rule that cuts batches out of it.

With no delay a free worker takes whatever waits, so batches grow only under load.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from modelhost.errors import QueueFull
from modelhost.fair import GAVE_WAY, FairQueue, make_room

T = TypeVar("T")


@dataclass(eq=False)
class Job(Generic[T]):
    """One request; `future` is resolved exactly once."""

    request: T
    future: asyncio.Future[Any]
    enqueued_at: float
    dispatched_at: float = field(default=0.0)
    solo: bool = False  # a retry goes alone: if it kills a worker, it alone did


class BatchQueue(Generic[T]):
    def __init__(
        self,
        model: str,
        capacity: int,
        max_batch_size: int,
        max_batch_delay_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.model = model
        self.capacity = capacity
        self.max_batch_size = max_batch_size
        self.max_batch_delay_s = max_batch_delay_s
        self.clock = clock
        self._jobs: deque[Job[T]] = deque()

    def __len__(self) -> int:
        return len(self._jobs)

    def put(self, job: Job[T]) -> None:
        if len(self._jobs) >= self.capacity:
            raise self._full()
        self._jobs.append(job)

    def _full(self, holding: str = "") -> QueueFull:
        return QueueFull(
            f"model {self.model} has {len(self._jobs)} requests queued, the limit "
            f"(job_queue_size) is {self.capacity}{holding}; retry after a pause, or raise "
            "--job-queue-size or --max-workers-per-model"
        )

    def discard(self, job: Job[T]) -> None:
        """Take out a job whose deadline passed while it waited."""
        with contextlib.suppress(ValueError):  # already in a batch
            self._jobs.remove(job)

    def head(self) -> Job[T]:
        """The job the next batch starts with; only while some wait."""
        return self._jobs[0]

    def due_at(self) -> float | None:
        return self._jobs[0].enqueued_at + self.max_batch_delay_s if self._jobs else None

    def ready(self) -> bool:
        due = self.due_at()
        return due is not None and (len(self._jobs) >= self.max_batch_size or self.clock() >= due)

    def take(self) -> list[Job[T]]:
        """A solo job goes alone."""
        now = self.clock()
        batch: list[Job[T]] = []
        while self._jobs and len(batch) < self.max_batch_size:
            job = self._pop(batch)
            if job is None:
                break
            batch.append(job)
            if job.solo:
                break
        for job in batch:
            job.dispatched_at = now
        return batch

    def _pop(self, batch: list[Job[T]]) -> Job[T] | None:
        """The next job; None if it is solo and `batch` holds some."""
        jobs = self._jobs
        return None if batch and jobs[0].solo else jobs.popleft()

    def take_all(self) -> list[Job[T]]:
        jobs, self._jobs = list(self._jobs), deque()
        return jobs


class FairBatchQueue(BatchQueue[T]):
    """With tenants on: batches cut in fair order across the tenants whose requests wait.

    A model's requests cost about alike, so each is charged one request over its tenant's
    weight; the oldest still says when a batch is due. Fair order only past a batch of two
    tenants' or more: the next batch takes what it holds.
    """

    def __init__(
        self,
        model: str,
        capacity: int,
        max_batch_size: int,
        max_batch_delay_s: float,
        clock: Callable[[], float],
        tenant_of: Callable[[Job[T]], str],
        weight: Callable[[str], float] | None = None,
    ) -> None:
        super().__init__(model, capacity, max_batch_size, max_batch_delay_s, clock)
        self.tenant_of = tenant_of
        self._fair: FairQueue[Job[T]] = FairQueue(weight=weight)
        # the one tenant whose requests wait in their order; None: several, or fair order
        self._alone: str | None = None

    def put(self, job: Job[T]) -> None:
        jobs = self._jobs  # in age order, there too: when a batch is due
        tenant = self.tenant_of(job)
        if len(jobs) >= self.capacity:
            self._make_room(tenant)
        jobs.append(job)
        if tenant == self._alone:  # the one tenant waiting keeps its order
            return
        if self._fair.waiting:
            self._fair.push(tenant, job)
        elif len(jobs) == 1:
            self._alone = tenant
        else:
            self._alone = None
            if len(jobs) > self.max_batch_size:  # from now on the fair queue orders them
                for waiting in jobs:
                    self._fair.push(self.tenant_of(waiting), waiting)

    def _make_room(self, tenant: str) -> None:
        """`make_room`'s choice, carried out."""
        fair, alone = self._fair, self._alone
        if fair.waiting:
            held = fair.statistics().waiting
        else:
            held = {alone: len(self._jobs)} if alone else Counter(map(self.tenant_of, self._jobs))
        most, holding = make_room(held, tenant)
        if most is None:
            raise self._full(holding)
        newest = fair.last_of(most) if fair.waiting else self._newest_of(most)
        error = self._full(holding + GAVE_WAY)
        self.discard(newest)
        if not newest.future.done():
            newest.future.set_exception(error)

    def _newest_of(self, tenant: str) -> Job[T]:
        return next(job for job in reversed(self._jobs) if self.tenant_of(job) == tenant)

    def discard(self, job: Job[T]) -> None:
        if not self._fair.waiting:
            super().discard(job)
        elif self._fair.discard(self.tenant_of(job), job):
            self._jobs.remove(job)
            self._settle()

    def head(self) -> Job[T]:
        if not self._fair.waiting:  # in their order
            return self._jobs[0]
        tenant = self._fair.next_tenant()
        assert tenant is not None  # no tenant has a cap here
        return self._fair.first_of(tenant)

    def take_all(self) -> list[Job[T]]:
        self._fair.clear()
        self._alone = None
        return super().take_all()

    def _pop(self, batch: list[Job[T]]) -> Job[T] | None:
        if not self._fair.waiting:  # in their order
            jobs = self._jobs
            return None if batch and jobs[0].solo else jobs.popleft()
        tenant = self._fair.next_tenant()
        assert tenant is not None
        if batch and self._fair.first_of(tenant).solo:
            return None
        job = self._fair.take_from(tenant)
        self._fair.charge(tenant, 1.0)
        if self._jobs[0] is job:
            self._jobs.popleft()
        else:  # taken ahead of older jobs: found near the front
            self._jobs.remove(job)
        self._settle()
        return job

    def _settle(self) -> None:
        """With one tenant's requests left, leave them in their own order."""
        if self._fair.backlogged == 1:
            self._alone = self._fair.next_tenant()
            self._fair.clear()
