"""Each model's way into memory and out of it.

A model has at most one record in the memory tier, and each step checks its record is still
current before acting. Loads are single-flight per name and wait for an earlier incarnation to
leave its workers. A load claims a free worker before it reserves memory, so queued loads hold
no room.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable

from sortedcontainers import SortedDict

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import MemoryTier, Resident, State
from modelhost.errors import (
    DeadlineExceeded,
    InsufficientMemory,
    ModelhostError,
    ModelLoadError,
    ModelNotLoaded,
    ShuttingDown,
    Unavailable,
    WorkerDied,
)
from modelhost.host.calls import LoadOutcome
from modelhost.host.copies import Copies, OnLoaded
from modelhost.host.culprits import HeldBack
from modelhost.host.devices import DevicePlacement
from modelhost.host.failed_loads import FailedLoads
from modelhost.host.fetch_failures import FetchFailures
from modelhost.host.manifests import Manifests
from modelhost.host.seams import Disk
from modelhost.host.shortfall import all_busy, never_fits, quota_busy, quota_never_fits
from modelhost.host.signatures import Signatures
from modelhost.host.under_way import UnderWay
from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.signatures import merged


class Residency:
    """The only part that adds or drops a model's record."""

    def __init__(
        self,
        memory: MemoryTier,
        disk: Disk,
        *,
        events: EventLog,
        manifests: Manifests,
        copies: Copies,
        deadline_s: float,
        clock: Callable[[], float],
        observe_memory: Callable[[], Awaitable[None]],
        on_loaded: OnLoaded,
        loads: UnderWay[LoadOutcome] | None = None,
        model_tenant: Callable[[str], str] | None = None,
        devices: DevicePlacement | None = None,
    ) -> None:
        self.memory, self.disk, self.events = memory, disk, events
        self.devices = devices  # None: no device holds models
        self.manifests, self.copies, self.changes = manifests, copies, copies.changes
        self.on_loaded = on_loaded
        self.observe_memory = observe_memory
        self.deadline_s = deadline_s
        self.clock = clock
        self.sources: SortedDict = SortedDict()  # name → URL, when not its store path
        self.reading: set[str] = set()  # loaded models whose runtime may still read their files
        self.signatures = Signatures()
        self.loads: UnderWay[LoadOutcome] = UnderWay() if loads is None else loads
        self.failed_loads = FailedLoads(clock=clock)
        self.fetch_failures = FetchFailures(events, clock)
        self.held_back = HeldBack(
            self.failed_loads, events, self.version_of, self.unload, memory, clock=clock
        )
        self.model_tenant = model_tenant  # None: a model is its first loader's tenant's
        copies.sandboxes.attach(self._empty_sandbox)

    async def ensure_loaded(self, name: str, tenant: str = "") -> LoadOutcome:
        """Load `name` once for all callers; it is not evicted before they resume.

        The model is its name's tenant's where the tenant rule reads names, else `tenant`'s,
        the tenant of the request that brings it in.
        """
        task = self.loads.get(name) or self.loads.start(name, self._load(name, tenant))
        try:
            with self.memory.victims.awaited(name):
                return await asyncio.shield(task)
        finally:
            if not self.memory.victims.is_awaited(name):  # a victim now, for a load waiting
                self.changes.notify()

    def needs_artifact(self, name: str) -> bool:
        """Whether its files must stay on disk (loading, or its runtime may read them).

        A loaded model read whole can lose them, so a disk smaller than memory still serves.
        """
        loading = name in self.loads or self.copies.arriving_of(name) is not None
        return loading or name in self.reading

    def source_of(self, name: str) -> str:
        return self.sources.get(name) or self.disk.stores.url_of(name)

    def cached(self, name: str) -> Artifact | None:
        """Its disk entry, if it `loads_from` the entry's source."""
        artifact = self.disk.get(name)
        return artifact if artifact and self.loads_from(name, artifact.source) else None

    def loads_from(self, name: str, source: str) -> bool:
        """Whether `name` loads from `source` now."""
        try:
            return source == self.source_of(name)
        except ModelhostError:  # a name no store may hold
            return False

    def set_source(self, name: str, url: str) -> None:
        self.sources[name] = url
        self.signatures.forget(name)

    def forget_source(self, name: str) -> None:
        self.sources.pop(name, None)
        self.signatures.forget(name)

    def version_of(self, name: str) -> Callable[[], Awaitable[str]]:
        """Asks the store."""
        return functools.partial(self.disk.version, self.source_of(name))

    def tenant_of(self, name: str, requested_by: str = "") -> str:
        """Whose model `name` is, if loaded for a request of `requested_by`."""
        return self.model_tenant(name) if self.model_tenant is not None else requested_by

    async def _load(self, name: str, requested_by: str) -> LoadOutcome:
        await self._departed(name)
        tenant = self.tenant_of(name, requested_by)
        source = self.source_of(name)
        version = self.version_of(name)  # asked only if needed
        await self.held_back.refuse(name, tenant, version)
        try:
            found = await self.disk.materialize(name, source, tenant)
        except ModelhostError as error:
            self.fetch_failures.failed(name, error)
            raise
        started = self.clock()
        try:
            await self._load_artifact(name, found.artifact, tenant)
        except ModelLoadError as error:  # the artifact's fault
            await self.failed_loads.remember(name, version, error)
            raise
        except (WorkerDied, DeadlineExceeded) as error:  # it cost the worker
            await self.failed_loads.worker_lost(name, version, error)
            raise
        self.failed_loads.loaded(name)
        await self.held_back.recheck(name, tenant, version)
        await self.relieve_pressure()
        return LoadOutcome(found.tier, (self.clock() - started) * 1000, found.download_ms)

    async def _load_artifact(self, name: str, artifact: Artifact, tenant: str) -> None:
        self.manifests.read(name, artifact)
        worker = await self.copies.claim_loader(name, tenant)
        try:
            await self._load_into(worker, name, artifact, tenant)
        finally:
            self.copies.release_loader(worker)

    async def _load_into(
        self, worker: WorkerHandle, name: str, artifact: Artifact, tenant: str
    ) -> None:
        reserved = self.manifests.reservation(name, artifact)
        resident = await self.make_room(name, reserved, tenant)
        try:
            await self._load_on_worker(resident, artifact, worker, reserved)
        except BaseException as error:
            self.forget(resident)
            self.signatures.forget(name)
            self.events.emit("failure", name, reason="load", detail={"error": repr(error)})
            self.disk.delete(name, reason="load_failed")  # a corrupt file is fetched anew
            raise

    async def _departed(self, name: str) -> None:
        """Wait for an earlier incarnation to leave its workers (they key by name)."""
        await self.changes.until(lambda: self._gone(name))

    def held(self, name: str) -> bool:
        """Loading or loaded."""
        return self.memory.get(name) is not None or name in self.loads

    def _gone(self, name: str) -> bool:
        return self.memory.get(name) is None and not self.copies.leaving_of(name)

    async def _load_on_worker(
        self, resident: Resident, artifact: Artifact, worker: WorkerHandle, reserved: int
    ) -> None:
        name = resident.name
        loaded = await self.copies.load(name, artifact, worker, "invoked", reserved)
        footprint = self.manifests.measured(name, loaded)
        if not worker.alive:  # died after answering: the model went with it
            raise Unavailable(f"the worker loading model {name} died; retry is safe")
        self.memory.mark_loaded(name, worker.worker_id, footprint, loaded.load_ms)
        if self.devices is not None:
            self.devices.loaded(name, worker.worker_id, loaded)
        if loaded.reads_artifact:
            self.reading.add(name)
        signature = merged(self.manifests.of(name).signature, loaded.signature)
        self.signatures.loaded_now(name, signature)
        if loaded.runtimes:
            self.disk.note_runtimes(artifact.name, loaded.runtimes)
        self.copies.open(name, self.on_loaded(name, loaded.batches), worker)

    async def make_room(self, name: str, size: int, tenant: str = "") -> Resident:
        """Reserve `size` for `tenant`'s model `name`, unloading victims; return the new record.

        Room held by memory being returned (models leaving, a trimmed heap, a recycled worker)
        is waited for until the deadline: a reading that lowers the baseline wakes the load.
        """
        self._check_fits(name, size, tenant)
        await self.observe_memory()
        await self.copies.shed(self.memory.shortfall_bytes(size))
        deadline = self.clock() + self.deadline_s
        pinned = self.manifests.is_pinned(name)
        while (victims := self.memory.reserve(name, size, pinned, tenant)) is None:
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise InsufficientMemory(self._busy(name, size, tenant))
            await self.changes.next(remaining)
            # copies loaded meanwhile go before models (a tenant's minimum may spare its models)
            await self.copies.shed(self.memory.shortfall_bytes(size))
        resident = self.memory.get(name)
        assert resident is not None  # only this load task owns the name
        await self._unload_many(victims, "evict", self.memory.victims.policy.name, tenant)
        self.memory.victims_gone(resident, size)
        return resident

    def _check_fits(self, name: str, size: int, tenant: str) -> None:
        """507 at once for a model larger than the budget's room or its tenant's maximum."""
        if not self.memory.fits_ever(size):
            raise InsufficientMemory(never_fits(self.memory, name, size))
        max_bytes = self.memory.limits_of(tenant).memory_max_bytes
        if max_bytes and size > max_bytes:
            raise InsufficientMemory(quota_never_fits(name, tenant, size, max_bytes))

    def _busy(self, name: str, size: int, tenant: str) -> str:
        """Why the load had no room by its deadline: its tenant's maximum, or the budget."""
        if self.memory.over_max_bytes(tenant, size) > 0:
            return quota_busy(self.memory, name, tenant, size, self.deadline_s)
        return all_busy(self.memory, name, size, self.deadline_s)

    async def unload(self, name: str, reason: str = "requested") -> int:
        """Unload on DELETE; those in flight finish first, until the deadline."""
        resident = self.memory.get(name)
        if resident is None or resident.state is not State.LOADED:
            raise ModelNotLoaded(f"model {name} is not loaded")
        if not await self._drained(resident):
            raise ModelNotLoaded(f"model {name} was unloaded while this request waited")
        return await self._unload_one(resident, "unload", reason)

    async def _drained(self, resident: Resident) -> bool:
        """Stop taking requests for the model, and wait for those in flight until the deadline;
        False if it was unloaded meanwhile."""
        self.memory.begin_unload(resident.name)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(
                self.changes.until(lambda: not resident.in_flight), self.deadline_s
            )
        return self.is_current(resident)

    async def _empty_sandbox(self, residents: list[Resident]) -> None:
        """Unload a sandboxed worker's models, so that another tenant's may have it."""
        loaded = [resident for resident in residents if resident.state is State.LOADED]
        drained = await asyncio.gather(*(self._drained(resident) for resident in loaded))
        victims = [resident for resident, still in zip(loaded, drained, strict=True) if still]
        await self._unload_many(victims, "evict", "tenant_apart")

    async def _unload_many(
        self, victims: list[Resident], kind: str, reason: str, for_tenant: str = ""
    ) -> None:
        """`for_tenant`: the tenant whose load evicts them."""
        kept_s = self.memory.victims.longest_idle_s()
        await asyncio.gather(
            *(self._unload_one(v, kind, reason, kept_s, for_tenant) for v in victims)
        )

    async def _unload_one(
        self,
        resident: Resident,
        kind: str,
        reason: str,
        kept_s: float = 0.0,
        for_tenant: str = "",
    ) -> int:
        """Unload every copy of a model, with one event."""
        started = self.clock()
        idle_s = started - resident.last_used
        freed, worker_ms = 0, 0.0
        arriving = self.copies.arriving_of(resident.name)
        if arriving is not None:  # it sees the model leaving and goes too
            await asyncio.wait([arriving])
        try:
            for worker_id in list(resident.workers):
                unloaded = await self.copies.unload_from(worker_id, resident.name)
                freed, worker_ms = freed + unloaded.freed, worker_ms + unloaded.unload_ms
            # a copy scaled in is still leaving its worker: its room is not free before that
            await self.changes.until(lambda: not self.copies.leaving_of(resident.name))
        finally:
            self.forget(resident)
        self.events.emit(
            kind,
            resident.name,
            bytes=resident.bytes,
            reason=reason,
            worker=resident.worker_id,
            duration_ms=round((self.clock() - started) * 1000, 2),
            detail={
                "freed_bytes": freed,
                "worker_ms": round(worker_ms, 3),
                "idle_s": round(idle_s, 3),
                # how long this cache keeps a model nobody asks for: the thrash alarm's age
                "longest_idle_s": round(max(kept_s, idle_s), 3),
                **tenants(resident.tenant, for_tenant),
            },
        )
        return freed

    async def unload_idle(self, idle_s: float) -> None:
        """Unload the models unused for their own idle_unload_s, else for `idle_s`."""
        victims = self.memory.victims.idle(idle_s, self.manifests.own_idle_s)
        await self._unload_many(victims, "unload", "idle")

    async def relieve_pressure(self) -> None:
        """Unload idle models while more is committed than the budget allows."""
        await self._unload_many(self.memory.overflow_victims(), "evict", "memory_pressure")

    def worker_lost(self, worker: WorkerHandle) -> None:
        if self.devices is not None:
            self.devices.worker_lost(worker.worker_id)
        self.held_back.died(worker.died_running, worker.worker_id)  # while its models are known
        for resident in self.memory:
            if worker.worker_id not in resident.workers:
                continue  # a load under way there fails and forgets on its own
            self._lose_copy(resident, worker.worker_id)
            self.events.emit(
                "unload",
                resident.name,
                bytes=resident.footprint,
                reason="worker_died",
                worker=worker.worker_id,
            )
        self.changes.notify()

    def _lose_copy(self, resident: Resident, worker_id: int) -> None:
        """One copy died with its worker; with the last, the model leaves memory.

        The record stays while an unload or an arriving copy still needs it.
        """
        self.copies.lose(resident, worker_id)
        if resident.workers:
            return
        self.copies.close(resident.name)
        if resident.state is State.UNLOADING:
            return  # the unload under way drops the record
        arriving = self.copies.arriving_of(resident.name)
        if arriving is None:
            self.forget(resident)
            return
        self.memory.begin_unload(resident.name)
        arriving.add_done_callback(lambda _: self.forget(resident))

    def is_current(self, resident: Resident) -> bool:
        """Whether it is still the record of its name."""
        return self.memory.get(resident.name) is resident

    def forget(self, resident: Resident) -> None:
        """Drop the record and fail requests still waiting for the model."""
        name = resident.name
        if not self.is_current(resident):
            return  # an earlier incarnation finishing late
        self.memory.remove(name)
        if self.devices is not None:
            self.devices.unloaded(name)
        self.reading.discard(name)
        self.signatures.left(name)
        self.copies.close(name)
        self.changes.notify()

    def check_open(self) -> None:
        if self.changes.closing:
            raise ShuttingDown("the server is shutting down; retry on another instance")


def tenants(tenant: str, for_tenant: str) -> dict[str, str]:
    """An event's tenants: the model's, and the one whose load evicted it; none while off."""
    named = {"tenant": tenant} if tenant else {}
    return {**named, "for_tenant": for_tenant} if for_tenant else named
