"""The invoke path: admit a request, acquire its model, queue it, await answer or deadline.

A request for a model not loaded waits against that model's queue size, not max_concurrency,
so a flood on a cold model cannot refuse the loaded ones. With tenants on, a request past
max_concurrency waits in its tenant's fair queue instead of a 429. A request whose worker died
is tried once more, alone (docs/decisions.md, "A request whose worker dies is tried once more").
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import NoReturn

from modelhost.cache.memory import Resident, State
from modelhost.deadlines import DeadlineGroups
from modelhost.errors import (
    ConcurrencyLimit,
    DeadlineExceeded,
    ModelhostError,
    ModelNotLoaded,
    PoisonRequest,
    ShuttingDown,
    Unavailable,
    WorkerDied,
)
from modelhost.fair import Ticket
from modelhost.host.calls import Answer, Invocation, LoadOutcome, Result, tier_of
from modelhost.host.devices import ON_HOST, Readiness
from modelhost.host.held_bodies import HeldBodies
from modelhost.host.load_waits import LoadWaits
from modelhost.host.queues import Queues
from modelhost.host.residency import Residency
from modelhost.records.events import Event
from modelhost.scheduler import SchedulerSettings
from modelhost.scheduler.admission import FairAdmission
from modelhost.scheduler.batcher import Job
from modelhost.scheduler.dispatch import Dispatcher

MAX_ACQUIRE_ATTEMPTS = 5
COUNTED_BODY_BYTES = 4096  # less weighs less than its request's other state
HIT = LoadOutcome("hit", 0.0)  # the outcome of a request that found its model loaded
NO_TICKET = Ticket("", 0.0, None)  # a max_concurrency slot's


class InvokePath:
    def __init__(
        self,
        residency: Residency,
        queues: Queues,
        scheduling: SchedulerSettings,
        on_hit: Callable[[str], None],
        loads_on_invoke: bool = True,
        on_use: Callable[[str, int, bool], None] = lambda name, size, hit: None,
        ready: Callable[[str], Awaitable[Readiness]] | None = None,
    ) -> None:
        self.residency, self.queues, self.scheduling = residency, queues, scheduling
        self.dispatchers = residency.copies.dispatchers  # read only
        self.on_hit = on_hit
        self.on_use = on_use  # (model, footprint, found loaded)
        self.ready = ready  # the model on its device, where it has one; None: no devices
        self.loads_on_invoke = loads_on_invoke  # false under SageMaker's contract
        self.in_flight = 0
        self.fair = fair_admission(residency, scheduling)  # None: tenants are off
        room = scheduling.bodies_room_bytes
        self.bodies = None if self.fair is None or room is None else HeldBodies(room)
        if self.fair is not None and scheduling.tenant_policies is not None:
            residency.events.subscribe(self._on_event)
        # rates and caps, where a tenants file gives them
        self._check_each = None if self.fair is None or self.fair.rates is None else self.fair.check
        # a full server starts no load
        self._check_room = self._check_limit if self.fair is None else self.fair.check_slots
        self._end_slot = self._free_slot if self.fair is None else self.fair.release
        self.waiting_for_load = LoadWaits(
            scheduling.job_queue_size, self.fair is not None, residency.clock
        )
        # one timer for every request of a timeout, not one per request
        self._deadlines: DeadlineGroups[tuple[Dispatcher, Job[Invocation]]] = DeadlineGroups(
            scheduling.response_timeout_s, lambda key: self._expire(*key)
        )

    def _on_event(self, event: Event) -> None:
        if event.kind == "tenants_file_loaded" and self.fair is not None:
            self.fair.refill()

    async def invoke(self, name: str, invocation: Invocation) -> Result:
        if self._check_each is not None:
            self._check_each(invocation.tenant)
        size = len(invocation.body)
        if self.bodies is None or size < COUNTED_BODY_BYTES:
            return await self._invoke(name, invocation, self.residency.clock())
        return await self._holding_body(name, invocation, self.bodies, size)

    async def _holding_body(
        self, name: str, invocation: Invocation, bodies: HeldBodies, size: int
    ) -> Result:
        bodies.hold(invocation.tenant, size)
        try:
            return await self._invoke(name, invocation, self.residency.clock())
        finally:
            bodies.release(invocation.tenant, size)

    def _check_limit(self, tenant: str = "") -> None:
        limit = self.scheduling.max_concurrency
        if limit and self.in_flight >= limit:
            raise ConcurrencyLimit(
                f"the server has {self.in_flight} requests in flight, the limit "
                f"(max_concurrency) is {limit}; retry after a pause, or raise --max-concurrency"
            )

    def _is_loaded(self, name: str) -> bool:
        resident = self.residency.memory.get(name)
        return resident is not None and resident.state is State.LOADED

    async def _wait_for_load(self, name: str, tenant: str) -> LoadOutcome | None:
        """Load a model that is not loaded, with at most job_queue_size requests waiting for
        it, and as many of its tenant's waiting for loads."""
        self._check_room(tenant)
        r = self.residency
        if not self.loads_on_invoke and name not in r.loads:
            return None  # _acquire says it is not loaded
        with self.waiting_for_load.waiting(name, tenant) as waiter:
            outcome = await waiter.until(r.ensure_loaded(name, tenant))
        self.waiting_for_load.loaded(outcome)
        return outcome

    async def _invoke(self, name: str, invocation: Invocation, started: float) -> Result:
        try:
            loaded = (
                None
                if self._is_loaded(name)
                else await self._wait_for_load(name, invocation.tenant)
            )
            return await self._in_slot(name, invocation, started, loaded, solo=False)
        except Unavailable as error:
            if not self._retryable(name, error):
                refuse_retry(name, error)
        self.queues.count_retry()
        try:
            return await self._in_slot(name, invocation, started, None, solo=True)
        except WorkerDied as error:
            if not error.running:
                raise
            raise PoisonRequest(
                f"model {name}: a worker died running this request, and another when it ran "
                "alone: it is not tried again (does the handler crash its process on this "
                "input?); other requests are served as before"
            ) from error

    async def _in_slot(
        self,
        name: str,
        invocation: Invocation,
        started: float,
        loaded: LoadOutcome | None,
        solo: bool,
    ) -> Result:
        """`_attempt` in a slot: max_concurrency's, or the one its tenant's turn brings."""
        fair, ticket = self.fair, NO_TICKET
        if fair is None:  # max_concurrency's slot, held while the request runs
            self._check_limit()
            self.in_flight += 1
        else:
            ticket = fair.take_free(invocation.tenant) or await fair.acquire(invocation.tenant)
        try:
            result = await self._attempt(name, invocation, started, loaded, solo)
        except BaseException as error:  # unmeasured: charged the time it held the slot
            _held(error)(functools.partial(self._end_slot, ticket, None))
            raise
        self._end_slot(ticket, result.timings_ms["infer"])
        return result

    def _free_slot(self, ticket: Ticket, cost_ms: float | None) -> None:
        self.in_flight -= 1

    def _end_use(self, resident: Resident) -> None:
        self.residency.memory.end_request(resident)
        if resident.in_flight == 0:  # an idle model can make room for a waiting load
            self.residency.changes.notify()

    def _retryable(self, name: str, error: Unavailable) -> bool:
        """Whether the request never ran, or running it twice is harmless."""
        if isinstance(error, ShuttingDown):
            return False
        ran = isinstance(error, WorkerDied) and error.running
        return not ran or self.residency.manifests.retry_safe(name)

    async def _attempt(
        self,
        name: str,
        invocation: Invocation,
        started: float,
        loaded: LoadOutcome | None,
        solo: bool,
    ) -> Result:
        resident, outcome = await self._acquire(name, loaded, invocation.tenant)
        try:
            readiness = ON_HOST if self.ready is None else await self.ready(name)
            job = await self._answer(name, invocation, solo)
        except BaseException as error:  # past its deadline, in use until its batch ends
            _held(error)(functools.partial(self._end_use, resident))
            if outcome not in (None, HIT) and isinstance(error, ModelhostError):
                raise error.telling(_load_result(outcome, resident.footprint)) from error
            raise
        self._end_use(resident)
        answer: Answer = job.future.result()
        outcome = outcome or HIT
        fetched_ms = outcome.download_ms + outcome.load_ms
        timings = {
            "queue": max(0.0, (job.dispatched_at - started) * 1000 - fetched_ms),
            "download": outcome.download_ms,
            "load": outcome.load_ms,
            "infer": answer.infer_ms,
        }
        if readiness.move_ms:
            timings["wake"] = readiness.move_ms
            timings["queue"] = max(0.0, timings["queue"] - readiness.move_ms)
        tier = tier_of(outcome, readiness.tier)
        result = Result(answer.body, answer.content_type, outcome.tier, timings, tier)
        result.custom = answer.custom
        if outcome is not HIT:
            result.model_bytes = resident.footprint
        return result

    async def _acquire(
        self, name: str, outcome: LoadOutcome | None, tenant: str = ""
    ) -> tuple[Resident, LoadOutcome | None]:
        """The loaded model with one more request in flight; `outcome`: the load it waited for."""
        r = self.residency
        for _ in range(MAX_ACQUIRE_ATTEMPTS):
            r.check_open()
            resident = r.memory.get(name)
            if resident is not None and resident.state is State.LOADED:
                r.memory.begin_request(resident)
                self.on_hit(name)
                self.on_use(name, resident.footprint, outcome is None)
                return resident, outcome
            if not self.loads_on_invoke and name not in r.loads:
                raise ModelNotLoaded(
                    f"model {name} is not loaded; load it with POST /models "
                    f'{{"model_name": "{name}", "url": ...}} (SageMaker does on this 404)'
                )
            outcome = await r.ensure_loaded(name, tenant)
        raise Unavailable(
            f"model {name} was unloaded {MAX_ACQUIRE_ATTEMPTS} times before it "
            "could serve this request: the memory budget is too small for the "
            "traffic; raise --memory-budget"
        )

    async def _answer(self, name: str, invocation: Invocation, solo: bool) -> Job[Invocation]:
        dispatcher = self.dispatchers.get(name)
        if dispatcher is None:  # its last copy went while the request waited for its device
            raise Unavailable(f"model {name} was unloaded while this request waited; retry is safe")
        future = dispatcher.loop.create_future()
        job: Job[Invocation] = Job(invocation, future, self.residency.clock(), solo=solo)
        dispatcher.submit(job)
        key, timeout_s = (dispatcher, job), self._own_timeout_s(name)
        self._deadlines.add(key, timeout_s)
        try:
            await job.future
        except WorkerDied as error:
            error.running = True  # the worker held this request's batch
            raise
        finally:
            self._deadlines.discard(key, timeout_s)
        return job

    def _own_timeout_s(self, name: str) -> float | None:
        """The model's response_timeout_s; None: the server's."""
        return self.residency.manifests.of(name).response_timeout_s

    def _expire(self, dispatcher: Dispatcher, job: Job[Invocation]) -> None:
        if job.future.done():
            return
        dispatcher.queue.discard(job)
        where = "running in a worker" if job.dispatched_at else "in the queue"
        name = dispatcher.queue.model
        own_s = self._own_timeout_s(name)
        timeout_s = self.scheduling.response_timeout_s if own_s is None else own_s
        late = DeadlineExceeded.past_response_timeout(name, where, timeout_s, own=own_s is not None)
        if job.dispatched_at:  # its batch runs on: its slot and its model stay taken
            late.hold = dispatcher.linger(job)
        job.future.set_exception(late)


def _load_result(outcome: LoadOutcome, footprint: int) -> Result:
    """The load a failed request made."""
    timings = {"download": outcome.download_ms, "load": outcome.load_ms}
    tier = tier_of(outcome, ON_HOST.tier)
    return Result(b"", "", outcome.tier, timings, tier, model_bytes=footprint)


def _held(error: BaseException) -> Callable[[Callable[[], None]], None]:
    """What frees a request's slot and model: at once, or when its batch ends."""
    hold = error.hold if isinstance(error, DeadlineExceeded) else None
    return hold or _now


def _now(release: Callable[[], None]) -> None:
    release()


def refuse_retry(name: str, error: Unavailable) -> NoReturn:
    """Raise `error` for a request not tried again; if it ran, not its worker's "retry is safe"."""
    if not (isinstance(error, WorkerDied) and error.running):
        raise error
    raise WorkerDied(
        f"model {name}: its worker died running this request, which was not tried again: its "
        "handler is not marked idempotent, so the request may have run in part; send it again "
        "if running it twice is harmless (idempotent = true in its modelhost.toml lets the "
        "server retry it)"
    ) from error


def fair_admission(residency: Residency, scheduling: SchedulerSettings) -> FairAdmission | None:
    """Fair slots when tenants are on, as many as the settings give for the pool's workers."""
    if not scheduling.fair_tenants:
        return None
    workers = residency.copies.pool.health()[1]
    limit = scheduling.fair_limit(workers)
    return FairAdmission(
        limit,
        scheduling.job_queue_size,
        scheduling.response_timeout_s,
        residency.clock,
        scheduling.tenant_policies,
    )
