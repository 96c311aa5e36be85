"""Scaling: more copies of a model that keeps its workers busy, fewer when it calms down.

A copy pays only when the model alone keeps its workers busy (`SCALE_OUT_BUSY_SHARE` of the last
second); under memory pressure copies are the first thing given back (`Copies.shed`); an extra
copy that has not been needed for `scale_in_idle_s` is unloaded.
A model is loaded on `min_workers_per_model` workers at once (the floor: workers_per_model),
and scale-in keeps that many; memory pressure may still take copies below it.
This is the policy only: `Copies` loads and unloads them, within the limit given here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from modelhost.host.copies import Copies, OnLoaded
from modelhost.scheduler import ModelSchedule, SchedulerSettings
from modelhost.scheduler.dispatch import Dispatcher

SCALE_OUT_BUSY_SHARE = 0.8  # a copy pays only when the model alone keeps its workers this busy


class Scaling:
    """When a busy model gets one more copy, its floor of copies, and when copies go."""

    def __init__(self, copies: Copies, scheduling: SchedulerSettings) -> None:
        self.copies = copies
        self.scheduling = scheduling
        # TorchServe's PUT /models/{m}?min_worker=&max_worker=, over the server's settings
        self.ranges: dict[str, tuple[int, int]] = {}
        self._filling: set[asyncio.Task[None]] = set()

    def set_range(self, name: str, min_workers: int, max_workers: int) -> None:
        """A model's own floor and ceiling of copies (0: the server's settings)."""
        self.ranges[name] = (min_workers, max_workers)

    def floor_of(self, name: str) -> int:
        """Copies the model is loaded on at once and kept through lulls: workers_per_model."""
        floor = self.ranges.get(name, (0, 0))[0] or self.scheduling.min_workers_per_model
        return max(1, min(floor, self._max_copies(name)))

    def schedule_of(self, name: str) -> ModelSchedule:
        """The model's range of copies and its batching."""
        size, delay_ms = self._batching(name)
        return ModelSchedule(self.floor_of(name), self._max_copies(name), size, delay_ms)

    def _batching(self, name: str) -> tuple[int, float]:
        """Batch size and delay: its queue's once loaded, else what its manifest and the
        server's settings give a handler that does not batch."""
        dispatcher = self.copies.dispatchers.get(name)
        if dispatcher is not None:
            return dispatcher.queue.max_batch_size, dispatcher.queue.max_batch_delay_s * 1000
        manifest = self.copies.manifests.declared(name)
        size = self.scheduling.batch_size(manifest.batch_size, handler_batches=False)
        declared = manifest.max_batch_delay_ms
        return size, self.scheduling.max_batch_delay_ms if declared is None else declared

    def scale_out(self, name: str) -> None:
        """Requests wait for a free worker: load one more copy if the budget and limit allow."""
        dispatcher = self.copies.dispatchers.get(name)
        if dispatcher is not None and dispatcher.busy_share() >= SCALE_OUT_BUSY_SHARE:
            self.copies.start(name, "scale_out", self._max_copies(name))

    def loaded(self, make_dispatcher: Callable[[str, bool], Dispatcher]) -> OnLoaded:
        """What a first copy's load calls: its queue from `make_dispatcher`; with
        workers_per_model above 1 the other copies follow (`fill_floor`)."""

        def on_loaded(name: str, handler_batches: bool) -> Dispatcher:
            if self.floor_of(name) > 1:
                task = asyncio.ensure_future(self.fill_floor(name))
                self._filling.add(task)
                task.add_done_callback(self._filling.discard)
            return make_dispatcher(name, handler_batches)

        return on_loaded

    async def fill_floor(self, name: str) -> None:
        """Add copies of a just loaded model until it is on workers_per_model workers."""
        floor, copies = self.floor_of(name), self.copies
        while (resident := copies.memory.get(name)) and len(resident.workers) < floor:
            held = len(resident.workers)
            task = copies.arriving_of(name) or copies.start(
                name, "workers_per_model", self._max_copies(name)
            )
            if task is None:
                return  # no spare worker or no room: scale-out may add it later
            await task
            if len(resident.workers) <= held:
                return  # the copy failed (its event says why): no retrying in a loop

    def _max_copies(self, name: str) -> int:
        limit = self.ranges.get(name, (0, 0))[1] or self.copies.manifests.of(name).max_workers
        workers = len(self.copies.pool.workers)
        return min(limit or self.scheduling.max_workers_per_model or workers, workers)

    async def scale_in(self) -> None:
        """Unload one extra copy of each model that has not waited for a worker lately."""
        now = self.copies.clock()
        for name, dispatcher in list(self.copies.dispatchers.items()):
            resident = self.copies.memory.get(name)
            if resident is None or len(resident.workers) <= self.floor_of(name):
                continue
            if self.copies.arriving_of(name) is not None:
                continue
            if now - dispatcher.pressed_at >= self.scheduling.scale_in_idle_s:
                dispatcher.pressed_at = now  # one copy per idle period
                await self.copies.drop(resident, dispatcher)
