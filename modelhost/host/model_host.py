"""The core service: find a model, make room for it, load it, invoke it.

Each part is built after those it needs, so none sees another half built. Under SageMaker's
contract the platform picks what loads and goes; the host still unloads when memory runs short.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Container, Mapping
from typing import Any

from modelhost.cache.devices import DeviceTier
from modelhost.cache.memory import MemoryTier, State
from modelhost.errors import InsufficientMemory, ModelNotFound
from modelhost.host.calls import Invocation, LoadOutcome, Result
from modelhost.host.changes import Changes
from modelhost.host.copies import Copies
from modelhost.host.devices import DevicePlacement, device_statistics
from modelhost.host.invoking import InvokePath
from modelhost.host.journal import Journal
from modelhost.host.listing import Listing, Servable
from modelhost.host.manifests import Manifests
from modelhost.host.memory_readings import MemoryReadings, PssReading, ServerPss
from modelhost.host.queues import Queues
from modelhost.host.registry import Registered, Registry, Versions
from modelhost.host.residency import Residency
from modelhost.host.sandboxes import Sandboxes
from modelhost.host.scaling import Scaling
from modelhost.host.seams import Disk, Pool
from modelhost.host.shortfall import never_fits
from modelhost.host.sizing import Sizing
from modelhost.host.under_way import UnderWay
from modelhost.host.worker_range import scale_workers
from modelhost.records.events import EventLog
from modelhost.records.progress import LoadProgress
from modelhost.records.statistics import (
    DiskStatistics,
    HostStatistics,
    MemoryStatistics,
    ModelStatistics,
    TenantHoldings,
    WorkerStatistics,
)
from modelhost.scheduler import ModelSchedule, SchedulerSettings
from modelhost.units import format_bytes
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.signatures import Signature
from modelhost.workers.views import Views


class ModelHost:
    """Serves any model in the store within the memory and disk budgets."""

    def __init__(
        self,
        pool: Pool,
        memory: MemoryTier,
        disk: Disk,
        events: EventLog,
        *,
        pinned: frozenset[str],
        deadline_s: float,
        clock: Callable[[], float] = time.monotonic,
        scheduling: SchedulerSettings | None = None,
        pss_bytes: Callable[[], int | PssReading] | None = None,
        max_rows_per_request: int = 0,
        sagemaker_contract: bool = False,
        sizing: Callable[[MemoryTier, EventLog, Callable[[], float]], Sizing] = Sizing,
        model_tenant: Callable[[str], str] | None = None,
        why_untrusted: Callable[[str], str] = lambda name: "",
        devices: DeviceTier | None = None,
        views: Views | None = None,
    ) -> None:
        self.pool, self.memory, self.disk, self.events = pool, memory, disk, events
        self.sagemaker_contract = sagemaker_contract
        self.given_urls: dict[str, str] = {}  # as each LoadModel gave it
        self.clock, self.epoch_at_zero = clock, time.time() - clock()
        self.scheduling = scheduling or SchedulerSettings(response_timeout_s=deadline_s)
        loads: UnderWay[LoadOutcome] = UnderWay()
        self.manifests = Manifests(
            events,
            pinned,
            max_rows_per_request,
            lambda name: self.residency.held(name),  # called once serving
            functools.partial(self.scheduling.batch_size, handler_batches=True),
        )
        self.changes = Changes()
        self.memory_readings = MemoryReadings(
            pss_bytes or ServerPss(pool.pids, functools.partial(_allowance_bytes, memory)),
            memory,
            pss_bytes is None,  # /proc is slow to read: off the loop, unless a test gives one
            on_fall=self.changes.notify,
        )
        self.devices = DevicePlacement(
            devices or DeviceTier([]),
            memory,
            pool,
            events=events,
            changes=self.changes,
            deadline_s=deadline_s,
            pin_of=self.manifests.device_of,
        )
        self.copies = Copies(
            pool,
            memory,
            disk,
            events=events,
            manifests=self.manifests,
            changes=self.changes,
            deadline_s=deadline_s,
            clock=clock,
            why_untrusted=why_untrusted,
            leaving_worker=self.devices.copy_leaving,
            left_worker=self.devices.copy_left,
            arrived=self.devices.loaded,
            sandboxes=Sandboxes(memory, why_untrusted, model_tenant or (lambda name: ""), views),
            weight=self.scheduling.tenant_weight,
        )
        self.scaling = Scaling(self.copies, self.scheduling)
        self.queues = Queues(
            pool,
            self.manifests,
            self.scheduling,
            clock,
            self.scaling.scale_out,
            on_grown=self.devices.grown,
            on_device=self.devices.capable.__contains__,
            models_shared=model_tenant is None,
        )
        self.residency = Residency(
            memory,
            disk,
            events=events,
            manifests=self.manifests,
            copies=self.copies,
            deadline_s=deadline_s,
            clock=clock,
            observe_memory=self.memory_readings.observe,
            on_loaded=self.scaling.loaded(self.queues.dispatcher),
            loads=loads,
            model_tenant=model_tenant,
            devices=self.devices,
        )
        self.registry = Registry(self.residency)
        self.journal: Journal | None = None  # what --restore-registered keeps, once it is on
        self.progress = LoadProgress(events)
        self.sizing = sizing(memory, events, clock)
        self.invoke_path = InvokePath(
            self.residency,
            self.queues,
            self.scheduling,
            on_hit=self.registry.revalidate_in_background,
            loads_on_invoke=not sagemaker_contract,
            on_use=self.sizing.used,
            ready=self.devices.ready if devices is not None else None,  # else no await a hit
        )

    async def invoke(self, name: str, invocation: Invocation) -> Result:
        """Invoke `name` (or a registered `m/v`)."""
        return await self.invoke_path.invoke(self.registry.invoked(name), invocation)

    async def scale_workers(self, name: str, min_workers: int | None, max_workers: int) -> int:
        """TorchServe's scaling call (None: no min_worker); the copies the model is on."""
        return await scale_workers(self.residency, self.scaling, name, min_workers, max_workers)

    async def load(self, name: str) -> None:
        """Load `name` from its source unless held; its copies as its schedule asks."""
        await self.residency.ensure_loaded(name)

    async def register_and_load(self, name: str, url: str) -> LoadOutcome:
        return await self.registry.register_and_load(name, url)

    async def unload(self, name: str) -> int:
        """Unload after in-flight requests finish; return the bytes freed."""
        return await self.residency.unload(name)

    def source_of(self, name: str) -> str:
        return self.residency.source_of(name)

    def schedule_of(self, name: str) -> ModelSchedule:
        return self.scaling.schedule_of(name)

    # registered models and their versions, for the protocols
    def keep_journal(self, journal: Journal) -> None:
        """Registrations are recorded in `journal` from now on (--restore-registered)."""
        self.journal = journal

    def sole_startup_model(self) -> str:
        """The one model loaded at start, or ""."""
        at_startup = self.registry.at_startup
        return next(iter(at_startup)) if len(at_startup) == 1 else ""

    def is_registered(self, name: str) -> bool:
        """Registered with a URL, loaded or loading."""
        return self.registry.is_registered(name)

    def versions_of(self, model: str) -> Versions | None:
        """The versions of `model`; None for a model registered without versions."""
        return self.registry.versions.get(model)

    @property
    def versioned(self) -> Container[str]:
        """The models registered with versions."""
        return self.registry.versions

    def owner_of(self, name: str) -> tuple[str, str] | None:
        """The model and version held as `name`, if any."""
        return self.registry.owners.get(name)

    def name_of(self, model: str, version: str) -> str:
        """The name `version` of `model` is held as; ModelNotFound for an unknown version."""
        return self.registry.name_of(model, version)

    def resolve(self, path: str) -> str:
        """The name a request's `m` or `m/v` means."""
        return self.registry.resolve(path)

    async def register_version(
        self, model: str, url: str, settings: Mapping[str, Any] | None, version: str | None
    ) -> Registered:
        """Register and fetch the version of `model` at `url` (`version`: where read)."""
        return await self.registry.register_version(model, url, settings, version)

    async def unregister(self, name: str) -> None:
        """Unload `name` if loaded and forget its source and version."""
        await self.registry.unregister(name)

    async def unregister_version(self, model: str, version: str | None) -> str:
        """Unregister `version` of `model` (None: the default)."""
        return await self.registry.unregister_version(model, version)

    def set_default(self, model: str, version: str) -> None:
        self.registry.set_default(model, version)

    async def exists(self, name: str) -> bool:
        """Whether `name` is a model: held, on disk, registered, or in its store."""
        name = self.registry.resolve(name)
        if self.state_of(name) or self.disk.get(name) or self.registry.is_registered(name):
            return True
        try:
            store, key = self.disk.stores.locate(self.source_of(name))
            await store.stat(key)
        except ModelNotFound:
            return False
        return True

    async def load_as_told(self, name: str, url: str) -> LoadOutcome:
        """SageMaker's LoadModel: 409 if held, 507 where room would need an eviction."""
        self.registry.check_not_held(name)
        await self._check_room(name, self.disk.stores.admit(url))
        self.registry.check_not_held(name)  # another LoadModel may have begun meanwhile
        self.given_urls[name] = url
        try:
            return await self.registry.register_and_load(name, url)
        except BaseException:
            self._forget_unless_held(name)
            raise

    async def unload_as_told(self, name: str) -> int:
        """SageMaker's UnloadModel."""
        try:
            return await self.residency.unload(name)
        finally:
            self._forget_unless_held(name)

    def given_url(self, name: str) -> str:
        """The URL given to load or register `name`, else its key in the store."""
        return self.given_urls.get(name) or self.registry.given_url(name)

    async def archive_identity(self, url: str) -> tuple[str, str]:
        """The archive's modelName (else its file's name) and modelVersion."""
        return await self.registry.archive_identity(url)

    def _forget_unless_held(self, name: str) -> None:
        """Forget what LoadModel gave, unless another one is under way."""
        if not self.residency.held(name):
            self.given_urls.pop(name, None)
            self.residency.forget_source(name)

    async def _check_room(self, name: str, url: str) -> None:
        """507 where the load would evict, so the platform picks the victim."""
        artifact = (await self.disk.materialize(name, url)).artifact
        self.manifests.read(name, artifact)
        size = self.manifests.reservation(name, artifact)
        m = self.memory
        if not m.fits_ever(size):
            raise InsufficientMemory(never_fits(m, name, size))
        await self.memory_readings.observe()
        free, budget = m.unreserved_bytes, m.budget.budget_bytes
        if size > free:
            raise InsufficientMemory(
                f"model {name} needs about {format_bytes(size)} but {format_bytes(max(0, free))} "
                f"of the memory budget of {format_bytes(budget)} is free with the models "
                f"loaded ({format_bytes(m.committed_bytes)} committed); DELETE /models/<name> "
                "to make room (SageMaker does on this 507), or raise --memory-budget"
            )

    def connect(self) -> None:
        """Hear of workers lost and joined; keep the disk from deleting what a load reads."""
        self.pool.attach(on_lost=self.residency.worker_lost, on_joined=self.changes.notify)
        self.disk.attach(in_use=self.residency.needs_artifact)

    def close(self) -> None:
        """Wake what waits on a change, to end; apply the disk index's queued writes."""
        self.changes.close()
        self.disk.close()

    @property
    def store_uri(self) -> str:
        return self.disk.stores.default.uri

    @property
    def closing(self) -> bool:
        return self.changes.closing

    def model_names(self) -> Listing:
        on_disk = Servable(self.disk, self.residency.loads_from)
        stores = self.disk.stores
        return Listing(self.memory.residents, on_disk, self.residency.sources, stores.default)

    def state_of(self, name: str) -> State | None:
        resident = self.memory.get(name)
        return resident.state if resident else None

    def signature_of(self, name: str) -> Signature:
        """The last load's; empty before one."""
        return self.residency.signatures.of(name) or Signature()

    def failed_load(self, name: str) -> str | None:
        """Why `name`'s last load failed, while that failure is remembered."""
        failed = self.residency.failed_loads.recall(name)
        return failed.message if failed else None

    def statistics(self) -> HostStatistics:
        m, b, d = self.memory, self.memory.budget, self.disk
        residents = list(m)
        memory = MemoryStatistics(
            budget_bytes=b.budget_bytes,
            baseline_bytes=b.baseline_bytes,
            committed_bytes=m.committed_bytes,
            headroom_bytes=b.headroom_bytes,
            pss_bytes=self.memory_readings.last_bytes,
            models={state.value: sum(r.state is state for r in residents) for state in State},
            footprints={r.name: r.bytes for r in residents if r.state is State.LOADED},
            frontend_bytes=b.frontend_bytes,
            frontend_allowance_bytes=b.frontend.bytes if b.frontend else 0,
        )
        workers = tuple(_worker(w) for w in self.pool.workers.values())
        disk = DiskStatistics(d.budget_bytes, d.used_bytes, d.count())
        devices = device_statistics(self.devices.tier)
        batching, sizing = self.queues.batching, self.sizing.statistics()
        return HostStatistics(memory, disk, workers, batching, sizing, devices=devices)

    def tenant_holdings(self) -> TenantHoldings:
        """What each tenant holds, read cheaply: running totals of both tiers."""
        memory, held_back = self.memory.ledger.tenant_bytes, self.residency.held_back.held_s()
        return TenantHoldings(dict(memory), self.disk.tenant_bytes(), held_back)

    def model_statistics(self, name: str) -> ModelStatistics:
        resident, artifact = self.memory.get(name), self.residency.cached(name)
        state = resident.state.value if resident else "on_disk" if artifact else "remote"
        if not resident and name in self.residency.loads:
            state = State.LOADING.value  # fetching it, before it holds any memory
        dispatcher = self.copies.dispatchers.get(name)
        held = [self.pool.workers.get(w) for w in (resident.workers if resident else [])]
        last_used = artifact.last_used if artifact else None
        if resident:  # the tier's clock is monotonic
            last_used = self.epoch_at_zero + resident.last_used
        loaded = resident is not None and resident.state is State.LOADED
        return ModelStatistics(
            name=name,
            url=self.residency.source_of(name),
            state=state,
            memory_bytes=resident.bytes if resident and loaded else 0,
            disk_bytes=artifact.bytes if artifact else 0,
            workers=tuple(_worker(w) for w in held if w is not None),
            queued=len(dispatcher.queue) if dispatcher else 0,
            pinned=bool(resident and resident.pinned) or self.manifests.is_pinned(name),
            loaded_at_startup=name in self.registry.at_startup,
            hits=resident.hits if resident else 0,
            in_flight=resident.in_flight if resident else 0,
            last_used=last_used,
            loaded_at=resident.loaded_at if resident else None,
            load_ms=resident.load_ms if resident else None,
            load_reserve_bytes=self.manifests.known_reservation(name),
            events=tuple(self.events.for_model(name)),
            load_progress=self.progress.of(name),
        )


def _worker(worker: WorkerHandle) -> WorkerStatistics:
    return WorkerStatistics(worker.worker_id, worker.pid, len(worker.pending))


def _allowance_bytes(memory: MemoryTier) -> int:
    """The frontend's allowance; none: every byte of it counts against the models."""
    frontend = memory.budget.frontend
    return frontend.bytes if frontend is not None else 0
