"""The invoke path: admit a request, find its model loaded (loading it if need be), queue it for
the model's workers in batches, and wait for its answer or its deadline.

A request that failed because a worker died (while it waited, while its model loaded, or while
it ran, if its handler is pure or declared idempotent) is tried once more, alone in its batch: a
crash costs latency, not an error. If its worker dies again while running it alone, it is a
poison request: answered 500 and not tried again, so it cannot take down the pool.

Under SageMaker's contract (`loads_on_invoke` false) only LoadModel loads: a request for a model
not in memory fails with 404 (the platform's cue to load it), and joins a load under way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from modelhost.cache.memory import Resident, State
from modelhost.deadlines import Deadlines
from modelhost.errors import (
    ConcurrencyLimit,
    DeadlineExceeded,
    ModelNotLoaded,
    PoisonRequest,
    ShuttingDown,
    Unavailable,
    WorkerDied,
)
from modelhost.host.calls import Answer, Invocation, LoadOutcome, Result
from modelhost.host.residency import Residency
from modelhost.records.handler_metrics import HandlerMetrics
from modelhost.records.statistics import BatchingStatistics
from modelhost.scheduler import SchedulerSettings
from modelhost.scheduler.batcher import BatchQueue, Job
from modelhost.scheduler.dispatch import Dispatcher, Ended
from modelhost.workers.handle import Waiter, WorkerHandle
from modelhost.workers.messages import Answered, Infer, Item
from modelhost.workers.replies import checked

MAX_ACQUIRE_ATTEMPTS = 5


class InvokePath:
    """The invoke path: admission, the model's record, its queue, the retry of a batch whose
    worker died."""

    def __init__(
        self,
        residency: Residency,
        scheduling: SchedulerSettings,
        on_hit: Callable[[str], None],
        on_pressure: Callable[[str], None],
        loads_on_invoke: bool = True,
        on_use: Callable[[str, int, bool], None] = lambda name, size, hit: None,
    ) -> None:
        self.residency = residency
        self.scheduling = scheduling
        self.on_hit = on_hit  # a loaded model serves a request (the artifact may be due a check)
        self.on_pressure = on_pressure  # a model's requests wait for a free worker
        self.on_use = on_use  # (model, its footprint, found loaded): what sizing counts
        self.loads_on_invoke = loads_on_invoke
        self.in_flight = 0  # invocations received and not yet answered
        self.batching = BatchingStatistics()
        self.handler_metrics = HandlerMetrics()  # what handlers record through context.metrics
        # every request's deadline, kept by one timer (`Deadlines`), not one per request
        self._deadlines: Deadlines[tuple[Dispatcher, Job[Invocation]]] = Deadlines(
            scheduling.response_timeout_s, lambda key: self._expire(*key)
        )

    async def invoke(self, name: str, invocation: Invocation) -> Result:
        limit = self.scheduling.max_concurrency
        if limit and self.in_flight >= limit:
            raise ConcurrencyLimit(
                f"the server has {self.in_flight} requests in flight, the limit "
                f"(max_concurrency) is {limit}; retry after a pause, or raise --max-concurrency"
            )
        self.in_flight += 1
        try:
            return await self._invoke(name, invocation)
        finally:
            self.in_flight -= 1

    async def _invoke(self, name: str, invocation: Invocation) -> Result:
        started = self.residency.clock()
        try:
            return await self._attempt(name, invocation, started, solo=False)
        except Unavailable as error:
            if not self._retryable(name, error):
                raise
        self.batching.retried += 1
        try:
            return await self._attempt(name, invocation, started, solo=True)
        except WorkerDied as error:
            if not error.running:
                raise
            raise PoisonRequest(
                f"model {name}: a worker died running this request, and another when it ran "
                "alone: it is not tried again (does the handler crash its process on this "
                "input?); other requests are served as before"
            ) from error

    def _retryable(self, name: str, error: Unavailable) -> bool:
        """Worth one more try: the request never ran, or running it twice is harmless."""
        if isinstance(error, ShuttingDown):
            return False
        ran = isinstance(error, WorkerDied) and error.running
        return not ran or self.residency.manifests.retry_safe(name)

    async def _attempt(
        self, name: str, invocation: Invocation, started: float, solo: bool
    ) -> Result:
        resident, outcome = await self._acquire(name)
        try:
            job = await self._answer(name, invocation, solo)
        finally:
            self.residency.memory.end_request(resident)
            if resident.in_flight == 0:  # only an idle model can make room for a waiting load
                self.residency.notify()
        answer: Answer = job.future.result()
        outcome = outcome or LoadOutcome("hit", 0.0)
        fetched_ms = outcome.download_ms + outcome.load_ms
        timings = {
            "queue": max(0.0, (job.dispatched_at - started) * 1000 - fetched_ms),
            "download": outcome.download_ms,
            "load": outcome.load_ms,
            "infer": answer.infer_ms,
        }
        return Result(answer.body, answer.content_type, outcome.tier, timings)

    async def _acquire(self, name: str) -> tuple[Resident, LoadOutcome | None]:
        """The loaded model with one more request in flight, loading it first if need be."""
        r, outcome = self.residency, None
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
            outcome = await r.ensure_loaded(name)
        raise Unavailable(
            f"model {name} was unloaded {MAX_ACQUIRE_ATTEMPTS} times before it "
            "could serve this request: the memory budget is too small for the "
            "traffic; raise --memory-budget"
        )

    async def _answer(self, name: str, invocation: Invocation, solo: bool) -> Job[Invocation]:
        """Queue the request for the model's workers and wait for its answer or its deadline."""
        dispatcher = self.residency.dispatchers[name]
        future = dispatcher.loop.create_future()
        job: Job[Invocation] = Job(invocation, future, self.residency.clock(), solo=solo)
        dispatcher.submit(job)
        key = (dispatcher, job)
        self._deadlines.add(key)
        try:
            await job.future
        except WorkerDied as error:
            error.running = True  # not a load's: the worker held this request's batch
            raise
        finally:
            self._deadlines.discard(key)
        return job

    def _expire(self, dispatcher: Dispatcher, job: Job[Invocation]) -> None:
        if job.future.done():
            return
        dispatcher.queue.discard(job)
        where = "running in a worker" if job.dispatched_at else "in the queue"
        job.future.set_exception(
            DeadlineExceeded(
                f"model {dispatcher.queue.model} gave no answer within "
                f"{self.scheduling.response_timeout_s:g} s (default_response_timeout); the "
                f"request was still {where}; raise --default-response-timeout-s, or add "
                "workers if requests wait in the queue"
            )
        )

    def dispatcher(self, name: str, handler_batches: bool) -> Dispatcher:
        """The model's queue and batcher, with its manifest's settings over the server's."""
        manifest, settings = self.residency.manifests.of(name), self.scheduling
        delay_ms = manifest.max_batch_delay_ms
        queue: BatchQueue[Invocation] = BatchQueue(
            name,
            settings.job_queue_size,
            settings.batch_size(manifest.batch_size, handler_batches),
            (settings.max_batch_delay_ms if delay_ms is None else delay_ms) / 1000,
            self.residency.clock,
        )

        start = functools.partial(self._start_batch, name)
        return Dispatcher(queue, start, lambda: self.on_pressure(name), settings.slots_per_worker)

    def _start_batch(
        self, name: str, worker: WorkerHandle, batch: list[Job[Any]], ended: Ended
    ) -> None:
        """One frame to the worker for the batch; when its reply comes, each job gets its own
        answer or error, and `ended` the seconds the worker spent."""
        items = tuple(_item(job.request) for job in batch)
        payload = b"".join(job.request.body for job in batch)
        self.batching.count(len(batch))
        sent = self.residency.pool.send(worker, Infer(name, items), payload, name)
        sent.add_done_callback(
            functools.partial(_answer_batch, batch, worker, ended, self.handler_metrics)
        )


def _item(request: Invocation) -> Item:
    return Item(request.content_type, request.accept, request.params, len(request.body))


def _answer_batch(
    jobs: list[Job[Any]],
    worker: WorkerHandle,
    ended: Ended,
    handler_metrics: HandlerMetrics,
    sent: Waiter,
) -> None:
    """The batch's reply came (or its worker died): answer its jobs, then say it has ended."""
    try:
        reply, body = sent.result()
        answered = checked(reply, Answered, worker)
        resolve_batch(jobs, answered, body)
        handler_metrics.record(answered.samples)
    except Exception as error:  # noqa: BLE001  (every job not yet answered gets it)
        ended(0.0, error)
        return
    ended(answered.infer_ms / 1000, None)


def resolve_batch(jobs: list[Job[Any]], reply: Answered, payload: bytes) -> None:
    """Give each job of a batch its answer, cut from the reply's payload, or its error."""
    offset = 0
    for job, answer in zip(jobs, reply.answers, strict=True):
        body = payload[offset : offset + answer.size]
        offset += answer.size
        if job.future.done():  # its deadline passed while the worker ran it
            continue
        if answer.failure is None:
            job.future.set_result(Answer(body, answer.content_type, reply.infer_ms))
        else:
            job.future.set_exception(answer.failure.rebuild())
