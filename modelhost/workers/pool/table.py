"""The table of workers: the one record the pool's parts share."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Hello


@dataclass
class WorkerTable:
    """The workers that said hello, by id, and the forks still awaited, by id."""

    workers: dict[int, WorkerHandle] = field(default_factory=dict)
    forking: dict[int, asyncio.Future[WorkerHandle]] = field(default_factory=dict)
    untrusted_forks: set[int] = field(default_factory=set)  # of `forking`

    def admit(self, hello: Hello, pid: int) -> None:
        """Refuse, with ConnectionError, a hello no fork awaits, or one claiming another kind
        or another process than the one that connected (`pid`): a model's code can dial in."""
        waiter = self.forking.get(hello.worker_id)
        if waiter is None or waiter.done():
            refused = f"names worker {hello.worker_id}, which no fork awaits"
        elif hello.untrusted != (hello.worker_id in self.untrusted_forks):
            refused = f"says worker {hello.worker_id} is of the kind it was not forked as"
        elif hello.pid != pid or any(worker.pid == pid for worker in self.workers.values()):
            refused = f"claims pid {hello.pid}, or comes from a worker already joined"
        else:
            return
        raise ConnectionError(f"a hello from pid {pid} {refused}")

    def join(self, worker: WorkerHandle) -> None:
        """Add a worker, and give it to whoever awaits its fork."""
        self.workers[worker.worker_id] = worker
        waiter = self.forking.get(worker.worker_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(worker)

    def leave(self, worker: WorkerHandle) -> None:
        self.workers.pop(worker.worker_id, None)

    def missing(self, size: int, untrusted_size: int = 0) -> list[bool]:
        """The workers a pool of `size`, `untrusted_size` of them for untrusted models, lacks
        (True: one for untrusted models), forks under way counted as there."""
        untrusted = len(self.untrusted_forks) + sum(w.untrusted for w in self.workers.values())
        trusted = len(self.workers) + len(self.forking) - untrusted
        lacking = max(0, untrusted_size - untrusted)
        return [True] * lacking + [False] * max(0, size - untrusted_size - trusted)
