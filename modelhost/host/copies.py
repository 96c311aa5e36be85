"""Which workers hold each loaded model, and every change to that.

This part owns the loaders, copies arriving and leaving, and shedding. A leaving copy counts
until its worker lets go, since workers key models by name.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import MemoryTier, Resident, State
from modelhost.errors import ModelhostError, Unavailable
from modelhost.host.changes import Changes
from modelhost.host.load_order import LoadOrder
from modelhost.host.manifests import Manifests, load_event
from modelhost.host.sandboxes import Sandboxes
from modelhost.host.seams import Disk, Pool
from modelhost.host.under_way import UnderWay
from modelhost.records.events import EventLog
from modelhost.records.progress import LOADING, QUEUED, report
from modelhost.scheduler.dispatch import Dispatcher
from modelhost.scheduler.placement import least_loaded
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Loaded, Unload, Unloaded

OnLoaded = Callable[[str, bool], Dispatcher]  # (model, handler batches) → its queue


async def nothing_to_wait_for(name: str, worker_id: int) -> None:
    """No device: a copy leaves at once."""


class Copies:
    def __init__(
        self,
        pool: Pool,
        memory: MemoryTier,
        disk: Disk,
        *,
        events: EventLog,
        manifests: Manifests,
        changes: Changes,
        deadline_s: float,
        clock: Callable[[], float],
        why_untrusted: Callable[[str], str] = lambda name: "",
        leaving_worker: Callable[[str, int], Awaitable[None]] = nothing_to_wait_for,
        left_worker: Callable[[str, int], None] = lambda name, worker_id: None,
        arrived: Callable[[str, int, Loaded], None] = lambda name, worker_id, loaded: None,
        sandboxes: Sandboxes | None = None,
        weight: Callable[[str], float] | None = None,
    ) -> None:
        self.pool, self.memory, self.disk, self.events = pool, memory, disk, events
        self.why_untrusted = why_untrusted  # "": a trusted model, for a trusted worker
        self.sandboxes = sandboxes or Sandboxes(memory, why_untrusted, lambda name: "")
        self.manifests, self.changes = manifests, changes
        self.deadline_s = deadline_s
        self.clock = clock
        self.dispatchers: dict[str, Dispatcher] = {}
        self.loaders: dict[int, float] = {}  # worker → load started at
        self.load_order = LoadOrder(weight)
        self.leaving: set[tuple[str, int]] = set()  # (model, worker)
        self.arriving: UnderWay[None] = UnderWay()
        self.leaving_worker = leaving_worker  # before the Unload
        self.left_worker = left_worker  # after it: the device's room is free
        self.arrived = arrived  # a copy serves: a device may take it

    async def claim_loader(self, name: str, tenant: str = "") -> WorkerHandle:
        """The least loaded free worker no copy of `name` is leaving, in the tenants' fair
        order; makes one free where other tenants' models hold every sandboxed worker."""
        try:
            with self.load_order.waiting_for(tenant, name) as place:
                queued = False
                while not (free := self._free_loaders(name)) or not self.load_order.may_go(
                    place, self._may_load
                ):
                    if not queued:
                        report(self.events, name, QUEUED)
                        queued = True
                    await self._a_loader_frees(name, bool(free))
                worker = least_loaded(free, self.memory)
                self.load_order.took(tenant, place, worker.worker_id)
        finally:
            if self.load_order.waiting:  # the next may go
                self.changes.notify()
        self.loaders[worker.worker_id] = self.clock()
        self.sandboxes.take(worker, name)
        return worker

    async def _a_loader_frees(self, name: str, others_turn: bool) -> None:
        live = self._live_workers()
        if not live:
            await self._a_worker_joins()
        elif not others_turn and (held := self.sandboxes.to_free(name, live, set(self.loaders))):
            await self.sandboxes.empty(held)
            self.pool.retire(held)
        else:
            await self.changes.next()

    def _may_load(self, name: str) -> bool:
        return bool(self._free_loaders(name))

    def release_loader(self, worker: WorkerHandle) -> None:
        self.loaders.pop(worker.worker_id, None)
        self.load_order.released(worker.worker_id)
        self.changes.notify()

    def _live_workers(self) -> list[WorkerHandle]:
        return [worker for worker in self.pool.workers.values() if worker.alive]

    async def _a_worker_joins(self) -> None:
        try:
            await asyncio.wait_for(
                self.changes.until(lambda: bool(self._live_workers())), self.deadline_s
            )
        except asyncio.TimeoutError:
            raise Unavailable(
                "no worker is running (they are restarting); retry in a moment"
            ) from None

    def _free_loaders(self, name: str) -> list[WorkerHandle]:
        return [
            worker
            for worker in self._live_workers()
            if worker.worker_id not in self.loaders
            and (name, worker.worker_id) not in self.leaving
            and self.sandboxes.allows(worker, name)
        ]

    def a_loader_may_free(self, name: str) -> bool:
        """Whether a worker that could take another copy of `name` is loading something now."""
        resident = self.memory.get(name)
        if resident is None or self.changes.closing:
            return False
        return any(
            worker.worker_id in self.loaders
            and worker.worker_id not in resident.workers
            and self.sandboxes.allows(worker, name)
            for worker in self._live_workers()
        )

    def leaving_of(self, name: str) -> bool:
        return any(model == name for model, _ in self.leaving)

    def arriving_of(self, name: str) -> asyncio.Task[None] | None:
        return self.arriving.get(name)

    async def load(
        self, name: str, artifact: Artifact, worker: WorkerHandle, reason: str, reserved: int
    ) -> Loaded:
        """Load `name` on `worker`, with one `load` event."""
        offer = self.disk.offer_fast_copy(artifact) if self.manifests.plain(name) else None
        own_s = self.manifests.of(name).load_timeout_s
        loaded: Loaded | None = None
        report(self.events, name, LOADING)
        try:
            request = self.manifests.load_request(name, artifact, offer)
            request = await self.sandboxes.request(worker, request)
            loaded, _ = await self.pool.call(worker, request, Loaded, model=name, timeout_s=own_s)
        finally:
            if loaded is None:
                await self.sandboxes.left(worker, name)
            if offer is not None:
                written = loaded.fast_copy_written if loaded else 0
                self.disk.fast_copies.settle(offer, written, bool(loaded and loaded.fast_copy_read))
        now = self.clock()
        held_ms = (now - self.loaders.get(worker.worker_id, now)) * 1000
        fields = load_event(loaded, worker.worker_id, reason, held_ms, reserved)
        resident = self.memory.get(name)
        if resident is not None and resident.tenant:
            fields["detail"]["tenant"] = resident.tenant
        self.events.emit("load", name, **fields)
        return loaded

    def open(self, name: str, dispatcher: Dispatcher, worker: WorkerHandle) -> None:
        self.dispatchers[name] = dispatcher
        dispatcher.add(worker)

    def close(self, name: str) -> None:
        """Stop sending requests to the model; those waiting fail, safe to retry."""
        dispatcher = self.dispatchers.pop(name, None)
        if dispatcher is not None:
            dispatcher.fail_waiting(
                Unavailable(f"model {name} was unloaded while this request waited; retry is safe")
            )

    async def unload_from(self, worker_id: int, name: str) -> Unloaded:
        """Unload one copy (nothing freed if its worker died)."""
        await self.leaving_worker(name, worker_id)
        try:
            return await self._unload_on(worker_id, name)
        finally:
            self.left_worker(name, worker_id)

    async def _unload_on(self, worker_id: int, name: str) -> Unloaded:
        worker = self.pool.workers.get(worker_id)
        if worker is None:
            return Unloaded(0)
        try:
            own_s = self.manifests.of(name).load_timeout_s
            unloaded, _ = await self.pool.call(
                worker, Unload(name), Unloaded, model=name, timeout_s=own_s
            )
        except ModelhostError:
            return Unloaded(0)
        await self.sandboxes.left(worker, name)
        return unloaded

    def lose(self, resident: Resident, worker_id: int) -> None:
        dispatcher = self.dispatchers.get(resident.name)
        if dispatcher is not None:
            dispatcher.remove(worker_id)
        self.memory.copies.remove(resident, worker_id)
        self.memory.copies.release(resident)

    def start(self, name: str, reason: str, limit: int) -> asyncio.Task[None] | None:
        """Start loading one more copy if the budget and `limit` allow."""
        resident, artifact = self.memory.get(name), self.disk.get(name)
        if name in self.arriving or self.changes.closing or resident is None or artifact is None:
            return None
        if len(resident.workers) >= limit or resident.state is not State.LOADED:
            return None
        spare = [
            w
            for w in self.pool.workers.values()
            if self.sandboxes.allows(w, name) and self._may_take(w, resident)
        ]
        if name not in self.dispatchers or not spare or self.load_order.wanted(self._may_load):
            return None  # a waiting load's model has no copy at all: it goes first
        reserved = self.memory.copies.reserve(resident, self.manifests.known_reservation(name) or 0)
        if reserved is None:
            return None
        worker = least_loaded(spare, self.memory)
        self.loaders[worker.worker_id] = self.clock()
        self.sandboxes.take(worker, name)
        return self.arriving.start(name, self._add(resident, artifact, worker, reason, reserved))

    def _may_take(self, worker: WorkerHandle, resident: Resident) -> bool:
        busy = worker.worker_id in resident.workers or worker.worker_id in self.loaders
        return not busy and (resident.name, worker.worker_id) not in self.leaving

    async def _add(
        self,
        resident: Resident,
        artifact: Artifact,
        worker: WorkerHandle,
        reason: str,
        reserved: int,
    ) -> None:
        """Load the reserved copy; once loaded it keeps only its footprint."""
        name = resident.name
        try:
            loaded = await self.load(name, artifact, worker, reason, reserved)
        except ModelhostError as error:
            self.memory.copies.release(resident, reserved)
            self.events.emit("failure", name, reason=reason, detail={"error": str(error)})
            return
        finally:
            self.release_loader(worker)
        self.memory.copies.release(resident, reserved - resident.footprint)  # its peak is over
        dispatcher = self.dispatchers.get(name)
        if self.memory.get(name) is not resident or dispatcher is None or not worker.alive:
            try:  # unloaded meanwhile: counted until it has left
                await self._unload_leaving(name, worker.worker_id)
            finally:
                self.memory.copies.release(resident)
            return
        self.memory.copies.add(resident, worker.worker_id)
        self.arrived(name, worker.worker_id, loaded)
        dispatcher.add(worker)

    async def drop(self, resident: Resident, dispatcher: Dispatcher) -> int:
        """Drain and unload the least busy extra copy; return the bytes freed."""
        extra = [dispatcher.replicas[w] for w in resident.workers[1:] if w in dispatcher.replicas]
        if not extra:
            return 0
        replica = min(extra, key=lambda replica: replica.busy)
        await dispatcher.drain(replica)
        worker_id = replica.worker.worker_id
        held = self.memory.get(resident.name) is resident and worker_id in resident.workers
        if held and len(resident.workers) == 1:  # the other copies died while it drained
            dispatcher.resume(replica)
            return 0
        dispatcher.remove(worker_id)
        if not held:
            return 0  # the eviction or worker-death path counts it
        self.memory.copies.remove(resident, worker_id)  # before the await: an eviction skips it
        try:
            return await self._unload_leaving(resident.name, worker_id)
        finally:
            self.memory.copies.release(resident)

    async def _unload_leaving(self, name: str, worker_id: int) -> int:
        """Unload a copy no record counts; loads of the model wait until it is gone."""
        self.leaving.add((name, worker_id))
        try:
            return await self._unload_copy(name, worker_id)
        finally:
            self.leaving.discard((name, worker_id))
            self.changes.notify()

    async def _unload_copy(self, name: str, worker_id: int) -> int:
        started = self.clock()
        unloaded = await self.unload_from(worker_id, name)
        self.events.emit(
            "unload",
            name,
            bytes=self.manifests.footprints.get(name),
            reason="scale_in",
            worker=worker_id,
            duration_ms=round((self.clock() - started) * 1000, 2),
            detail={"freed_bytes": unloaded.freed, "worker_ms": unloaded.unload_ms},
        )
        return unloaded.freed

    async def shed(self, need_bytes: int) -> None:
        """Unload idle extra copies, least recent first: they go before models."""
        copied = [r for r in self.memory.copies.copied() if r.state is State.LOADED]
        for resident in sorted(copied, key=lambda r: (r.last_used, r.name)):
            dispatcher = self.dispatchers.get(resident.name)
            while need_bytes > 0 and dispatcher and len(resident.workers) > 1:
                extra = [dispatcher.replicas.get(w) for w in resident.workers[1:]]
                if all(replica is None or replica.busy for replica in extra):
                    break
                need_bytes -= resident.footprint
                await self.drop(resident, dispatcher)
