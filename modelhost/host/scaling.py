"""Scaling: more copies of a model that keeps its workers busy, fewer when it calms down.

A copy pays only when the model alone keeps its workers busy (`SCALE_OUT_BUSY_SHARE` of the last
second); under memory pressure copies are the first thing given back, idle ones least recently
used first; an extra copy that has not been needed for `scale_in_idle_s` is unloaded.
A model is loaded on `min_workers_per_model` workers at once (the floor: workers_per_model),
and scale-in keeps that many; memory pressure may still take copies below it.
"""

from __future__ import annotations

import asyncio

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import Resident, State
from modelhost.errors import ModelhostError
from modelhost.host.residency import Residency
from modelhost.host.under_way import UnderWay
from modelhost.scheduler import ModelSchedule, SchedulerSettings
from modelhost.scheduler.dispatch import Dispatcher
from modelhost.scheduler.placement import least_loaded
from modelhost.workers.handle import WorkerHandle

SCALE_OUT_BUSY_SHARE = 0.8  # a copy pays only when the model alone keeps its workers this busy


class Scaling:
    """Copies of a busy model on more workers, the floor of copies, and letting them go."""

    def __init__(self, residency: Residency, scheduling: SchedulerSettings) -> None:
        self.residency = residency
        self.scheduling = scheduling
        self.arriving: UnderWay[None] = UnderWay()  # a copy being loaded, per model
        # TorchServe's PUT /models/{m}?min_worker=&max_worker=, over the server's settings
        self.ranges: dict[str, tuple[int, int]] = {}

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
        dispatcher = self.residency.dispatchers.get(name)
        if dispatcher is not None:
            return dispatcher.queue.max_batch_size, dispatcher.queue.max_batch_delay_s * 1000
        manifest = self.residency.manifests.declared(name)
        size = self.scheduling.batch_size(manifest.batch_size, handler_batches=False)
        declared = manifest.max_batch_delay_ms
        return size, self.scheduling.max_batch_delay_ms if declared is None else declared

    def copy_arriving(self, name: str) -> asyncio.Task[None] | None:
        return self.arriving.get(name)

    def scale_out(self, name: str) -> None:
        """Requests wait for a free worker: load one more copy if the budget and limit allow."""
        dispatcher = self.residency.dispatchers.get(name)
        if dispatcher is not None and dispatcher.busy_share() >= SCALE_OUT_BUSY_SHARE:
            self._start_copy(name, "scale_out")

    def _start_copy(self, name: str, reason: str) -> asyncio.Task[None] | None:
        """Begin loading one more copy if the budget and limit allow; the task doing it."""
        r = self.residency
        resident, artifact = r.memory.get(name), r.disk.get(name)
        if name in self.arriving or r.closing or resident is None or artifact is None:
            return None
        if len(resident.workers) >= self._max_copies(name) or resident.state is not State.LOADED:
            return None
        spare = [w for w in r.pool.workers.values() if self._may_take(w, resident)]
        if name not in r.dispatchers or not spare:
            return None
        reserved = r.memory.reserve_copy(resident, r.manifests.known_reservation(name) or 0)
        if reserved is None:
            return None
        worker = least_loaded(spare, r.memory)
        r.take_loader(worker)
        return self.arriving.start(
            name, self._add_copy(resident, artifact, worker, reason, reserved)
        )

    async def fill_floor(self, name: str) -> None:
        """Add copies of a just loaded model until it is on workers_per_model workers."""
        floor = self.floor_of(name)
        while (resident := self.residency.memory.get(name)) and len(resident.workers) < floor:
            copies = len(resident.workers)
            task = self.arriving.get(name) or self._start_copy(name, "workers_per_model")
            if task is None:
                return  # no spare worker or no room: scale-out may add it later
            await task
            if len(resident.workers) <= copies:
                return  # the copy failed (its event says why): no retrying in a loop

    def _may_take(self, worker: WorkerHandle, resident: Resident) -> bool:
        """A worker without a copy of the model, not still unloading one, and not loading."""
        here, r = (resident.name, worker.worker_id), self.residency
        busy = worker.worker_id in resident.workers or worker.worker_id in r.loaders
        return not busy and here not in r.leaving

    def _max_copies(self, name: str) -> int:
        limit = self.ranges.get(name, (0, 0))[1] or self.residency.manifests.of(name).max_workers
        workers = len(self.residency.pool.workers)
        return min(limit or self.scheduling.max_workers_per_model or workers, workers)

    async def _add_copy(
        self,
        resident: Resident,
        artifact: Artifact,
        worker: WorkerHandle,
        reason: str,
        reserved: int,
    ) -> None:
        """Load the copy `reserved` bytes were reserved for; once loaded it keeps its footprint."""
        r, name = self.residency, resident.name
        try:
            await r.load_copy(name, artifact, worker, reason, reserved)
        except ModelhostError as error:
            r.memory.release_copy(resident, reserved)
            r.events.emit("failure", name, reason=reason, detail={"error": str(error)})
            return
        finally:
            r.release_loader(worker)
        r.memory.release_copy(resident, reserved - resident.footprint)  # its load's peak is over
        dispatcher = r.dispatchers.get(name)
        if not r.is_current(resident) or dispatcher is None or not worker.alive:
            try:  # unloaded (or its worker died) meanwhile: counted until it has left
                await self._unload_leaving(name, worker.worker_id)
            finally:
                r.memory.release_copy(resident)
            return
        resident.workers.append(worker.worker_id)
        dispatcher.add(worker)

    async def scale_in(self) -> None:
        """Unload one extra copy of each model that has not waited for a worker lately."""
        now = self.residency.clock()
        for name, dispatcher in list(self.residency.dispatchers.items()):
            resident = self.residency.memory.get(name)
            if resident is None or len(resident.workers) <= self.floor_of(name):
                continue
            if name in self.arriving:
                continue
            if now - dispatcher.pressed_at >= self.scheduling.scale_in_idle_s:
                dispatcher.pressed_at = now  # one copy per idle period
                await self._drop_copy(resident, dispatcher)

    async def _drop_copy(self, resident: Resident, dispatcher: Dispatcher) -> int:
        """Drain and unload the least busy extra copy; the bytes its worker freed."""
        r = self.residency
        extra = [dispatcher.replicas[w] for w in resident.workers[1:] if w in dispatcher.replicas]
        if not extra:
            return 0
        replica = min(extra, key=lambda replica: replica.busy)
        await dispatcher.drain(replica)
        worker_id = replica.worker.worker_id
        dispatcher.remove(worker_id)
        if not r.is_current(resident) or worker_id not in resident.workers:
            return 0  # evicted, or its worker died, meanwhile: that path unloads and counts it
        resident.workers.remove(worker_id)  # before the await: an eviction now skips this copy
        try:
            return await self._unload_leaving(resident.name, worker_id)
        finally:
            r.memory.release_copy(resident)

    async def _unload_leaving(self, name: str, worker_id: int) -> int:
        """Unload a copy no record counts any more; no load of the model lands there meanwhile,
        and a fresh load of it waits until the copy is gone (workers key models by name)."""
        r = self.residency
        r.leaving.add((name, worker_id))
        try:
            return await self._unload_copy(name, worker_id)
        finally:
            r.leaving.discard((name, worker_id))
            r.notify()

    async def shed_copies(self, need_bytes: int) -> None:
        """Under memory pressure copies go first: unload idle extra copies, least recent first."""
        memory = self.residency.memory
        copied = [r for r in memory if r.state is State.LOADED and len(r.workers) > 1]
        for resident in sorted(copied, key=lambda r: r.last_used):
            dispatcher = self.residency.dispatchers.get(resident.name)
            while need_bytes > 0 and dispatcher and len(resident.workers) > 1:
                extra = [dispatcher.replicas.get(w) for w in resident.workers[1:]]
                if all(replica is None or replica.busy for replica in extra):
                    break
                need_bytes -= resident.footprint
                await self._drop_copy(resident, dispatcher)

    async def _unload_copy(self, name: str, worker_id: int) -> int:
        r = self.residency
        started = r.clock()
        freed = await r.unload_from(worker_id, name)
        r.events.emit(
            "unload",
            name,
            bytes=r.manifests.footprints.get(name),
            reason="scale_in",
            worker=worker_id,
            duration_ms=round((r.clock() - started) * 1000, 2),
            detail={"freed_bytes": freed},
        )
        return freed
