"""The dispatcher of one model: its queue fed, a batch at a time, to the workers that hold it.

Full slots call `on_pressure`, and the host may add a copy.
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
from modelhost.fair import Ticket
from modelhost.scheduler.batcher import BatchQueue, Job
from modelhost.scheduler.turns import Turns, WorkerTurns
from modelhost.workers.handle import WorkerHandle

Ended = Callable[[float, BaseException | None], None]  # the worker's seconds, or the error
# calls `Ended` later, never within: no task per batch
Start = Callable[[WorkerHandle, list[Job[Any]], Ended], None]
BUSY_WINDOW_S = 1.0
PRESSURE_RECHECK_S = 0.1

logger = logging.getLogger("modelhost.scheduler")


@dataclass(eq=False)
class Replica:
    """A worker holding a copy."""

    worker: WorkerHandle
    slots: int
    busy: int = 0
    draining: bool = False  # being scaled in: takes no new batches
    drained: asyncio.Future[None] | None = None
    turns: WorkerTurns | None = None  # its worker's, with tenants on

    @property
    def free(self) -> bool:
        return self.busy < self.slots and not self.draining and self.worker.alive


class Dispatcher:
    """Owns one model's replicas."""

    def __init__(
        self,
        queue: BatchQueue[Any],
        start: Start,
        on_pressure: Callable[[], None],
        slots_per_worker: int = 1,
        turns: Turns | None = None,
    ) -> None:
        self.queue = queue
        self.turns = turns  # tenants on: the workers' turns, shared by every model
        self.start = start
        self.on_pressure = on_pressure
        self.slots_per_worker = slots_per_worker
        self.replicas: dict[int, Replica] = {}
        self.pressed_at = queue.clock()  # when requests last waited for a slot
        # uvloop's handle of a call under a millisecond ahead has no `when`
        self._timer: asyncio.Handle | None = None
        self._timer_at = 0.0
        self._created_at = queue.clock()
        self._batches: deque[tuple[float, float]] = deque()  # (ended at, seconds)
        self._busy_s = 0.0
        self._running_since: dict[int, tuple[float, WorkerHandle]] = {}  # by id of the batch
        self._loop: asyncio.AbstractEventLoop | None = None
        # id of a job answered before its batch ended → what to free when it ends
        self._lingering: dict[int, list[Callable[[], None]]] = {}

    def busy_share(self) -> float:
        """Worker-seconds per second and replica, lately."""
        now = self.queue.clock()
        self._forget_batches_before(now - BUSY_WINDOW_S)
        window_s = min(BUSY_WINDOW_S, now - self._created_at)
        if window_s <= 0 or not self.replicas:
            return 0.0
        running_s = sum(
            now - max(start, now - window_s)
            for start, worker in self._running_since.values()
            if self._worker_only_ours(worker)
        )
        return (self._busy_s + running_s) / (window_s * len(self.replicas))

    def _forget_batches_before(self, since: float) -> None:
        while self._batches and self._batches[0][0] < since:
            self._busy_s -= self._batches.popleft()[1]

    def _worker_only_ours(self, worker: WorkerHandle) -> bool:
        """Waiting behind another model is not busy."""
        return all(entry[1] == self.queue.model for entry in worker.pending.values())

    def worked_elsewhere(self, worked_s: float, pressed: bool) -> None:
        """A front's direct batches of this model: their worker time counts in the busy share,
        and requests that waited behind one press for a copy as waits in the queue do."""
        now = self.queue.clock()
        self._batches.append((now, worked_s))
        self._busy_s += worked_s
        self._forget_batches_before(now - BUSY_WINDOW_S)
        if pressed:
            self.pressed_at = now
            self.on_pressure()

    def claim_idle_span(self, now: float, idle_s: float) -> bool:
        """Whether no request waited for a slot in the last `idle_s`; a yes starts a new span,
        so that each span gives up one copy."""
        if now - self.pressed_at < idle_s:
            return False
        self.pressed_at = now
        return True

    def add(self, worker: WorkerHandle, slots: int | None = None) -> None:
        turns = self.turns.of(worker.worker_id) if self.turns is not None else None
        slots = slots or self.slots_per_worker
        self.replicas[worker.worker_id] = Replica(worker, slots, turns=turns)
        self.pump()

    async def drain(self, replica: Replica) -> None:
        """Return once its batches have ended."""
        replica.draining = True
        if replica.busy:
            if replica.drained is None:
                replica.drained = self.loop.create_future()
            await asyncio.shield(replica.drained)

    def resume(self, replica: Replica) -> None:
        """Give batches to a drained replica again."""
        replica.draining, replica.drained = False, None
        self.pump()

    def remove(self, worker_id: int) -> None:
        self.replicas.pop(worker_id, None)

    def fail_waiting(self, error: Exception) -> None:
        for job in self.queue.take_all():
            if not job.future.done():
                job.future.set_exception(error)

    def linger(self, job: Job[Any]) -> Callable[[Callable[[], None]], None]:
        """`job`, running, is answered early: the call that holds a release until its batch
        ends (or runs it, once it has)."""
        self._lingering[id(job)] = []

        def hold(release: Callable[[], None]) -> None:
            held = self._lingering.get(id(job))
            if held is None:
                release()
            else:
                held.append(release)

        return hold

    def submit(self, job: Job[Any]) -> None:
        self.queue.put(job)
        self.pump()

    def pump(self) -> None:
        while self.queue.ready():
            free = [replica for replica in self.replicas.values() if replica.free]
            if not free:
                self.pressed_at = self.queue.clock()
                self.on_pressure()
                # the busy share may have been read too early
                self._look_again_in(PRESSURE_RECHECK_S)
                return
            replica = self._least_busy(free)
            if replica is None:
                return  # woken when a turn frees
            batch = [job for job in self.queue.take() if not job.future.done()]
            if batch:
                self._start(replica, batch)
        self._wake_when_due()

    def _least_busy(self, free: list[Replica]) -> Replica | None:
        """The least busy of the free replicas whose worker has a turn; None: wait for one."""
        if self.turns is not None:
            with_turns = [r for r in free if r.turns is None or r.turns.open]
            if not with_turns:
                self._wait_for_turns(self.turns, free)
            free = with_turns
        return min(free, key=lambda r: (r.busy, len(r.worker.pending)), default=None)

    def _wait_for_turns(self, turns: Turns, free: list[Replica]) -> None:
        """No free replica's worker has a turn: wait for each one's next."""
        tenant = turns.tenant_of(self.queue.head())
        for replica in free:
            if replica.turns is not None:
                replica.turns.wait(tenant, self)

    def _start(self, replica: Replica, batch: list[Job[Any]]) -> None:
        replica.busy += 1
        self._running_since[id(batch)] = (self.queue.clock(), replica.worker)
        turns = replica.turns
        # the worker's turn, charged to the tenant of the batch's oldest request
        turn = None if turns is None else turns.take(turns.tenant_of(batch[0]))
        ended = functools.partial(self._ended, replica, batch, turn)
        try:
            self.start(replica.worker, batch, ended)
        except Exception as error:  # its worker had died: answer the batch, soon
            self.loop.call_soon(ended, 0.0, error)

    def _ended(
        self,
        replica: Replica,
        batch: list[Job[Any]],
        turn: Ticket | None,
        worked_s: float,
        error: BaseException | None,
    ) -> None:
        if error is not None:
            if not isinstance(error, ModelhostError):  # a defect of ours: a 500 each, not a hang
                logger.error("a batch of model %s failed", self.queue.model, exc_info=error)
            for job in batch:
                if not job.future.done():
                    job.future.set_exception(error)
        if self._lingering:
            for job in batch:
                for release in self._lingering.pop(id(job), ()):
                    release()
        # the worker's own time, not a wait behind a load there
        del self._running_since[id(batch)]
        now = self.queue.clock()
        self._batches.append((now, worked_s))
        self._busy_s += worked_s
        self._forget_batches_before(now - BUSY_WINDOW_S)  # the busy share may go unread
        replica.busy -= 1
        if replica.drained is not None and not replica.busy:
            replica.drained.set_result(None)
        if turn is not None:
            self._give_back(replica, turn, worked_s)
        self.pump()

    def _give_back(self, replica: Replica, turn: Ticket, worked_s: float) -> None:
        """The worker's turn to whoever the fair queue picks, this model among those waiting."""
        turns = replica.turns
        assert turns is not None  # a turn was taken from them
        if turns.members and self.queue.ready() and replica.free:
            turns.wait(turns.tenant_of(self.queue.head()), self)
        turns.give_back(turn, worked_s * 1000)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """Kept: CPython 3.11's `get_running_loop()` asks the kernel for the pid each time."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        return self._loop

    def _wake_when_due(self) -> None:
        due = self.queue.due_at()
        if due is not None:
            self._look_again_in(max(0.0, due - self.queue.clock()))

    def _look_again_in(self, delay_s: float) -> None:
        at = self.loop.time() + delay_s
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer, self._timer_at = self.loop.call_at(at, self._on_due), at

    def _on_due(self) -> None:
        self._timer = None
        self.pump()
