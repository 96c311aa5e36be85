"""The table of workers: the one record the pool's parts share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from modelhost.workers.handle import WorkerHandle


@dataclass
class WorkerTable:
    """The workers that said hello, by id, and the forks still awaited, by id."""

    workers: dict[int, WorkerHandle] = field(default_factory=dict)
    forking: dict[int, asyncio.Future[WorkerHandle]] = field(default_factory=dict)

    def join(self, worker: WorkerHandle) -> None:
        """Add a worker, and give it to whoever awaits its fork."""
        self.workers[worker.worker_id] = worker
        waiter = self.forking.get(worker.worker_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(worker)

    def leave(self, worker: WorkerHandle) -> None:
        self.workers.pop(worker.worker_id, None)

    def missing(self, size: int) -> int:
        """How many workers a pool of `size` lacks, forks under way counted as there."""
        return size - len(self.workers) - len(self.forking)
