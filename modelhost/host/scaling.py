"""The policy of copies: more for a model that keeps its workers busy, fewer when it calms.

`Copies` does the loading and unloading within the limit given here. Memory pressure may take
copies below the floor.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from modelhost.host.copies import Copies, OnLoaded
from modelhost.scheduler import ModelSchedule, SchedulerSettings
from modelhost.scheduler.dispatch import Dispatcher

SCALE_OUT_BUSY_SHARE = 0.8  # a copy pays only for a model this busy on its own


class Scaling:
    def __init__(self, copies: Copies, scheduling: SchedulerSettings) -> None:
        self.copies = copies
        self.scheduling = scheduling
        # TorchServe's PUT /models/{m}?min_worker=&max_worker=, over the server's settings
        self.ranges: dict[str, tuple[int | None, int]] = {}
        self._filling: set[asyncio.Task[None]] = set()

    def set_range(self, name: str, min_workers: int | None, max_workers: int) -> None:
        """None: no min_worker given, the server's workers_per_model stands."""
        self.ranges[name] = (min_workers, max_workers)

    def min_workers_of(self, name: str) -> int:
        """Copies kept through lulls: min_worker, else workers_per_model."""
        low = self.ranges.get(name, (None, 0))[0]
        floor = self.scheduling.min_workers_per_model if low is None else low
        return min(floor, self._max_copies(name))

    def floor_of(self, name: str) -> int:
        """Copies a load brings at once; a model scaled to 0 loads one."""
        return max(1, self.min_workers_of(name))

    def schedule_of(self, name: str) -> ModelSchedule:
        size, delay_ms = self._batching(name)
        return ModelSchedule(self.min_workers_of(name), self._max_copies(name), size, delay_ms)

    def _batching(self, name: str) -> tuple[int, float]:
        """Batch size and delay: the queue's once loaded, else the manifest's."""
        dispatcher = self.copies.dispatchers.get(name)
        if dispatcher is not None:
            return dispatcher.queue.max_batch_size, dispatcher.queue.max_batch_delay_s * 1000
        manifest = self.copies.manifests.declared(name)
        size = self.scheduling.batch_size(manifest.batch_size, handler_batches=False)
        declared = manifest.max_batch_delay_ms
        return size, self.scheduling.max_batch_delay_ms if declared is None else declared

    def scale_out(self, name: str) -> None:
        """Load one more copy if the model is busy and the limit allows."""
        dispatcher = self.copies.dispatchers.get(name)
        if dispatcher is None:
            return
        # asked on every request that waits: the cheap tests first
        resident = self.copies.memory.get(name)
        if resident is None or len(resident.workers) >= len(self.copies.pool.workers):
            return  # a copy on every worker is at any limit
        limit = self._max_copies(name)
        if len(resident.workers) >= limit:  # `Copies.start` would refuse
            return
        if dispatcher.busy_share() >= SCALE_OUT_BUSY_SHARE:
            self.copies.start(name, "scale_out", limit)

    def loaded(self, make_dispatcher: Callable[[str, bool], Dispatcher]) -> OnLoaded:
        """What a first copy's load calls; the floor's other copies follow."""

        def on_loaded(name: str, handler_batches: bool) -> Dispatcher:
            if self.floor_of(name) > 1:
                task = asyncio.ensure_future(self.fill_floor(name))
                self._filling.add(task)
                task.add_done_callback(self._filling.discard)
            return make_dispatcher(name, handler_batches)

        return on_loaded

    async def fill_floor(self, name: str) -> None:
        """Add copies of a just loaded model up to its floor."""
        floor, copies = self.floor_of(name), self.copies
        while (resident := copies.memory.get(name)) and len(resident.workers) < floor:
            held = len(resident.workers)
            task = copies.arriving_of(name) or copies.start(
                name, "workers_per_model", self._max_copies(name)
            )
            if task is None:
                if not copies.a_loader_may_free(name):
                    return  # scale-out may add it later
                await copies.changes.next()
                continue
            await task
            if len(resident.workers) <= held:
                return  # the copy failed: no retrying in a loop

    async def drop_above_limit(self, name: str) -> None:
        """Unload the copies above the model's limit, which TorchServe's max_worker lowers."""
        dispatcher = self.copies.dispatchers.get(name)
        while dispatcher and (resident := self.copies.memory.get(name)):
            if len(resident.workers) <= self._max_copies(name):
                return
            if not await self.copies.drop(resident, dispatcher):
                return  # no copy left that may go, or another path took it

    def _max_copies(self, name: str) -> int:
        limit = self.ranges.get(name, (0, 0))[1] or self.copies.manifests.of(name).max_workers
        workers = len(self.copies.pool.workers)
        return min(limit or self.scheduling.max_workers_per_model or workers, workers)

    async def scale_in(self) -> None:
        """Unload one extra copy of each copied model not pressed lately (every second: it must
        not walk every loaded model)."""
        now, memory = self.copies.clock(), self.copies.memory
        for name in sorted(r.name for r in memory.copies.copied()):
            dispatcher, resident = self.copies.dispatchers.get(name), memory.get(name)
            if dispatcher is None or resident is None:
                continue
            if len(resident.workers) <= self.floor_of(name):
                continue
            if self.copies.arriving_of(name) is not None:
                continue
            if dispatcher.claim_idle_span(now, self.scheduling.scale_in_idle_s):
                await self.copies.drop(resident, dispatcher)
