"""Each model's queue and batcher, and the frames that carry its batches."""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

from modelhost.host.calls import Answer, Invocation
from modelhost.host.manifests import Manifests
from modelhost.host.seams import Pool
from modelhost.records.handler_metrics import HandlerMetrics
from modelhost.records.statistics import BatchingStatistics
from modelhost.scheduler import SchedulerSettings
from modelhost.scheduler.batcher import BatchQueue, FairBatchQueue, Job
from modelhost.scheduler.dispatch import Dispatcher, Ended
from modelhost.scheduler.turns import Turns
from modelhost.workers.handle import Waiter, WorkerHandle
from modelhost.workers.messages import Answered, Infer, Item, item_of
from modelhost.workers.pool.calls import stuck_after_s
from modelhost.workers.replies import checked

Grown = Callable[[str, int, Answered], None]  # a call's measure on its device


class Queues:
    """Makes each model's dispatcher and counts its batches."""

    def __init__(
        self,
        pool: Pool,
        manifests: Manifests,
        scheduling: SchedulerSettings,
        clock: Callable[[], float],
        on_pressure: Callable[[str], None],
        on_grown: Grown = lambda name, worker_id, measured: None,
        on_device: Callable[[str], bool] = lambda name: False,
        models_shared: bool = True,
    ) -> None:
        self.pool, self.manifests, self.scheduling, self.clock = pool, manifests, scheduling, clock
        self.models_shared = models_shared  # false: a model's requests are all one tenant's
        self.on_pressure = on_pressure  # requests wait for a free worker
        self.on_grown = on_grown  # a first call measured on a device
        self.on_device = on_device  # whether a loaded model can use a device
        self.batching = BatchingStatistics()
        self.handler_metrics = HandlerMetrics()
        self.turns = _turns(scheduling)

    def dispatcher(self, name: str, handler_batches: bool) -> Dispatcher:
        """The model's queue and batcher, its manifest's settings over the server's."""
        manifest, settings = self.manifests.of(name), self.scheduling
        delay_ms = manifest.max_batch_delay_ms
        sizes = (
            name,
            settings.job_queue_size,
            settings.batch_size(manifest.batch_size, handler_batches, self.on_device(name)),
            (settings.max_batch_delay_ms if delay_ms is None else delay_ms) / 1000,
            self.clock,
        )
        queue: BatchQueue[Invocation] = (
            FairBatchQueue(*sizes, _tenant, self.turns.weight)
            if self.turns is not None and self.models_shared
            else BatchQueue(*sizes)  # one tenant's requests: fair order is arrival order
        )

        start = functools.partial(self._start_batch, name)
        pressed = functools.partial(self.on_pressure, name)
        return Dispatcher(queue, start, pressed, settings.slots_per_worker, self.turns)

    def count_retry(self) -> None:
        self.batching.retried += 1

    def _start_batch(
        self, name: str, worker: WorkerHandle, batch: list[Job[Any]], ended: Ended
    ) -> None:
        """Send the batch in one frame; its reply answers each job."""
        items = tuple(item_of(job.request, len(job.request.body)) for job in batch)
        payload = b"".join(job.request.body for job in batch)
        self.batching.count(len(batch))
        own_s = self.manifests.of(name).response_timeout_s
        stuck_s = None if own_s is None else stuck_after_s(own_s)
        sent = self.pool.send(
            worker, self._infer(name, items, batch[0]), payload, model=name, timeout_s=stuck_s
        )
        sent.add_done_callback(functools.partial(_answer_batch, batch, ended, self.handler_metrics))
        grown = functools.partial(_device_growth, name, worker.worker_id, self.on_grown)
        sent.add_done_callback(grown)

    def _infer(self, name: str, items: tuple[Item, ...], oldest: Job[Invocation]) -> Infer:
        """The batch's frame, charged to its oldest's tenant."""
        turns = self.turns
        if turns is None:
            return Infer(name, items)
        tenant = oldest.request.tenant
        weight = 1.0 if turns.weight is None else turns.weight(tenant)
        return Infer(name, items, tenant=tenant, weight=weight)


def _turns(scheduling: SchedulerSettings) -> Turns | None:
    """Tenants on: each worker's batches go to the tenants in fair order, by their weights (and
    each model's queue cuts its batches by the same weights)."""
    if not scheduling.fair_tenants:
        return None
    return Turns(scheduling.slots_per_worker, _tenant, scheduling.tenant_weight)


# a queued request's tenant, read in C: every request passes it once with tenants on
_tenant: Callable[[Job[Invocation]], str] = operator.attrgetter("request.tenant")


def _answer_batch(
    jobs: list[Job[Any]],
    ended: Ended,
    handler_metrics: HandlerMetrics,
    sent: Waiter,
) -> None:
    """Answer the batch's jobs from its reply (or its worker's death)."""
    try:
        reply, body = sent.result()
        answered = checked(reply, Answered)
        resolve_batch(jobs, answered, body)
        handler_metrics.record(answered.samples)
    except Exception as error:  # noqa: BLE001  (each unanswered job gets it)
        ended(0.0, error)
        return
    ended(answered.infer_ms / 1000, None)


def _device_growth(name: str, worker_id: int, on_grown: Grown, sent: Waiter) -> None:
    """Tell what a copy's call on its device measured there, if it did."""
    if sent.cancelled() or sent.exception() is not None:
        return
    reply, _ = sent.result()
    if isinstance(reply, Answered) and (reply.device_grown or reply.device_process):
        on_grown(name, worker_id, reply)


def resolve_batch(jobs: list[Job[Any]], reply: Answered, payload: bytes) -> None:
    """Give each job its answer, cut from the reply's payload, or its error."""
    for job, (answer, body) in zip(jobs, reply.bodies(payload), strict=True):
        if job.future.done():  # its deadline passed
            continue
        if answer.failure is None:
            job.future.set_result(Answer(body, answer.content_type, reply.infer_ms, answer.custom))
        else:
            job.future.set_exception(answer.failure.rebuild())
