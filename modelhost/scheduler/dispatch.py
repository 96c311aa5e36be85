"""The dispatcher of one model: its queue fed, a batch at a time, to the workers that hold it.

Each worker holding the model is a replica with a few slots (batches it may run at once: its
inference threads). Whenever the queue is ready (see `BatchQueue.ready`) and a replica has a free
slot, the least busy such replica takes the next batch; when a batch ends, the queue is looked at
again. When requests are ready but every slot is taken, `on_pressure` tells the host, which may
load the model into one more worker, if `busy_share` says the model alone keeps its workers busy.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from modelhost.errors import ModelhostError
from modelhost.scheduler.batcher import BatchQueue, Job
from modelhost.workers.handle import WorkerHandle

# told once when a batch is over: the seconds its worker spent on it, or the error that ended it
Ended = Callable[[float, BaseException | None], None]
# sends a batch to a worker and returns at once; its jobs are answered, then `Ended` told, later
# (never within the call): no task per batch, its creation, registration and first loop turn
Start = Callable[[WorkerHandle, list[Job[Any]], Ended], None]
BUSY_WINDOW_S = 1.0  # how far back busy_share looks
PRESSURE_RECHECK_S = 0.1  # while requests wait for a slot, how often on_pressure hears again

logger = logging.getLogger("modelhost.scheduler")


@dataclass(eq=False)
class Replica:
    """A worker holding a copy of the model: its slots, how many are busy, whether it drains."""

    worker: WorkerHandle
    slots: int
    busy: int = 0
    draining: bool = False  # being scaled in: finishes its batches, takes no new ones
    drained: asyncio.Future[None] | None = None  # resolved when a draining replica goes idle

    @property
    def free(self) -> bool:
        return self.busy < self.slots and not self.draining and self.worker.alive


class Dispatcher:
    """Owns one model's replicas: hands its queue's batches to free ones, and says when requests
    wait for lack of them (`on_pressure`)."""

    def __init__(
        self,
        queue: BatchQueue[Any],
        start: Start,
        on_pressure: Callable[[], None],
        slots_per_worker: int = 1,
    ) -> None:
        self.queue = queue
        self.start = start
        self.on_pressure = on_pressure
        self.slots_per_worker = slots_per_worker
        self.replicas: dict[int, Replica] = {}
        self.pressed_at = queue.clock()  # when requests last waited for a free slot
        # the next look at the queue, and when (uvloop's handle of a call less than a
        # millisecond ahead is a plain Handle, which does not say when)
        self._timer: asyncio.Handle | None = None
        self._timer_at = 0.0
        self._created_at = queue.clock()
        self._batches: deque[tuple[float, float]] = deque()  # (ended at, seconds) in the window
        self._busy_s = 0.0  # the sum of the window's batch seconds
        self._running_since: dict[int, tuple[float, WorkerHandle]] = {}  # by id of the batch
        self._loop: asyncio.AbstractEventLoop | None = None  # see `loop`

    def busy_share(self) -> float:
        """Worker-seconds spent on this model per second and replica over the last window:
        near 1.0 when it keeps each of its workers busy on its own."""
        now = self.queue.clock()
        while self._batches and self._batches[0][0] < now - BUSY_WINDOW_S:
            self._busy_s -= self._batches.popleft()[1]
        window_s = min(BUSY_WINDOW_S, now - self._created_at)
        if window_s <= 0 or not self.replicas:
            return 0.0
        running_s = sum(
            now - max(start, now - window_s)
            for start, worker in self._running_since.values()
            if self._worker_only_ours(worker)
        )
        return (self._busy_s + running_s) / (window_s * len(self.replicas))

    def _worker_only_ours(self, worker: WorkerHandle) -> bool:
        """Nothing of another model in flight there: a batch still running is this model's
        work, not a wait behind another model's load or batch."""
        return all(entry[1] == self.queue.model for entry in worker.pending.values())

    def add(self, worker: WorkerHandle, slots: int | None = None) -> None:
        """A worker now holds the model: it runs up to `slots` batches of it at once."""
        self.replicas[worker.worker_id] = Replica(worker, slots or self.slots_per_worker)
        self.pump()

    async def drain(self, replica: Replica) -> None:
        """Give `replica` no more batches and return once those it runs have ended."""
        replica.draining = True
        if replica.busy:
            if replica.drained is None:  # a second drain waits on the same future
                replica.drained = self.loop.create_future()
            await asyncio.shield(replica.drained)

    def remove(self, worker_id: int) -> None:
        self.replicas.pop(worker_id, None)

    def fail_waiting(self, error: Exception) -> None:
        """Answer every job still in the queue with `error` (the model has gone)."""
        for job in self.queue.take_all():
            if not job.future.done():
                job.future.set_exception(error)

    def submit(self, job: Job[Any]) -> None:
        self.queue.put(job)
        self.pump()

    def pump(self) -> None:
        """Start a batch on each free replica while the queue is ready."""
        while self.queue.ready():
            replica = self._least_busy_free()
            if replica is None:
                self.pressed_at = self.queue.clock()
                self.on_pressure()
                # again in a while: the busy share the host read may have been read too early
                # (the batch ahead had just begun), and a worker may have joined since
                self._look_again_in(PRESSURE_RECHECK_S)
                return
            batch = [job for job in self.queue.take() if not job.future.done()]  # not expired
            if batch:
                self._start(replica, batch)
        self._wake_when_due()

    def _least_busy_free(self) -> Replica | None:
        free = [replica for replica in self.replicas.values() if replica.free]
        return min(free, key=lambda r: (r.busy, len(r.worker.pending)), default=None)

    def _start(self, replica: Replica, batch: list[Job[Any]]) -> None:
        replica.busy += 1
        self._running_since[id(batch)] = (self.queue.clock(), replica.worker)
        ended = functools.partial(self._ended, replica, batch)
        try:
            self.start(replica.worker, batch, ended)
        except Exception as error:  # not sent (its worker had died): the batch's answer, soon
            self.loop.call_soon(ended, 0.0, error)

    def _ended(
        self, replica: Replica, batch: list[Job[Any]], worked_s: float, error: BaseException | None
    ) -> None:
        if error is not None:  # the batch's answer: its worker died or refused it
            if not isinstance(error, ModelhostError):  # a defect of ours: a 500 each, not a hang
                logger.error("a batch of model %s failed", self.queue.model, exc_info=error)
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(error)
        # the worker's own time: a batch that waited behind a load there is not a busy model
        del self._running_since[id(batch)]
        self._batches.append((self.queue.clock(), worked_s))
        self._busy_s += worked_s
        replica.busy -= 1
        if replica.drained is not None and not replica.busy:
            replica.drained.set_result(None)
        self.pump()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running event loop, kept: CPython 3.11 asks the kernel for the pid on each
        `asyncio.get_running_loop()`, and the invoke path wants it for every request."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _wake_when_due(self) -> None:
        """Look again when the oldest job has waited `max_batch_delay_s` for company."""
        due = self.queue.due_at()
        if due is not None:
            self._look_again_in(max(0.0, due - self.queue.clock()))

    def _look_again_in(self, delay_s: float) -> None:
        """Pump again after `delay_s`, unless a look is due sooner already."""
        at = self.loop.time() + delay_s
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer, self._timer_at = self.loop.call_at(at, self._on_due), at

    def _on_due(self) -> None:
        self._timer = None
        self.pump()
