"""The core service: find a model (memory → disk → store), make room for it, load it, invoke it.

Loads are single-flight per model: concurrent first requests share one load. Room is made only
when a load needs it, by unloading idle unpinned models chosen by the eviction policy; when every
candidate is busy the load waits for one to go idle, until its deadline, then fails with 507.
Nothing here knows about HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from modelhost.cache.disk import Artifact, DiskTier
from modelhost.cache.memory import MemoryTier, Resident, State
from modelhost.config import format_bytes
from modelhost.errors import (
    ConcurrencyLimit,
    DeadlineExceeded,
    InsufficientMemory,
    ModelAlreadyLoaded,
    ModelhostError,
    ModelLoadError,
    ModelNotLoaded,
    ShuttingDown,
    Unavailable,
)
from modelhost.manifest import NO_MANIFEST, Manifest, manifest_root, read_manifest
from modelhost.observe.events import EventLog
from modelhost.observe.memory import server_pss_bytes
from modelhost.scheduler import SchedulerSettings
from modelhost.scheduler.batcher import BatchQueue, Job
from modelhost.scheduler.dispatch import Dispatcher
from modelhost.scheduler.placement import least_loaded
from modelhost.workers.messages import Answered, Infer, Item, Load, Loaded, Unload, Unloaded
from modelhost.workers.pool import WorkerHandle, WorkerPool

MIN_FOOTPRINT_BYTES = 64 * 1024
ESTIMATE_FACTOR = 2.0  # reserve for the transient peak of unpickling, not only the resident size
MAX_ACQUIRE_ATTEMPTS = 5
SCALE_OUT_BUSY_SHARE = 0.8  # a copy pays only when the model alone keeps its workers this busy


def estimate_footprint(artifact_bytes: int) -> int:
    """Memory to reserve for a model never loaded before, from the size of its artifact."""
    return int(artifact_bytes * ESTIMATE_FACTOR) + MIN_FOOTPRINT_BYTES


@dataclass(frozen=True)
class Invocation:
    body: bytes
    content_type: str
    accept: str
    params: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Result:
    body: bytes
    content_type: str
    cache: str  # hit | disk | remote
    timings_ms: dict[str, float]


@dataclass(frozen=True)
class Answer:
    """A worker's answer to one request of a batch."""

    body: bytes
    content_type: str
    infer_ms: float  # the whole batch's


@dataclass
class BatchingStats:
    """Batches sent to workers and the requests they carried, since start (for /metrics)."""

    batches: int = 0
    requests: int = 0
    largest: int = 0

    def count(self, size: int) -> None:
        self.batches += 1
        self.requests += size
        self.largest = max(self.largest, size)


@dataclass(frozen=True)
class LoadOutcome:
    tier: str  # hit | disk | remote
    load_ms: float  # making room and loading into a worker
    download_ms: float = 0.0


class ModelHost:
    def __init__(
        self,
        pool: WorkerPool,
        memory: MemoryTier,
        disk: DiskTier,
        events: EventLog,
        pinned: frozenset[str],
        deadline_s: float,
        clock: Callable[[], float] = time.monotonic,
        scheduling: SchedulerSettings | None = None,
    ) -> None:
        self.pool, self.memory, self.disk, self.events = pool, memory, disk, events
        self.pinned = pinned
        self.deadline_s = deadline_s
        self.clock = clock
        self.scheduling = scheduling or SchedulerSettings(response_timeout_s=deadline_s)
        self.sources: dict[str, str] = {}  # model name → URL, when not its path in the store
        self.footprints: dict[str, int] = {}  # measured at each load, reused for the next
        self.manifests: dict[str, Manifest] = {}  # each model's own settings, read at each load
        self.dispatchers: dict[str, Dispatcher] = {}  # one per loaded model
        self.in_flight = 0  # invocations received and not yet answered
        self.batching = BatchingStats()
        self._loads: dict[str, asyncio.Task[LoadOutcome]] = {}
        self._scaling: dict[str, asyncio.Task[None]] = {}
        self._revalidations: dict[str, asyncio.Task[None]] = {}
        self._leaving: set[tuple[str, int]] = set()  # (model, worker) of copies being unloaded
        self._changed = asyncio.Event()
        self.closing = False
        pool.on_lost = self._worker_lost
        disk.in_use = lambda name: name in memory.residents or name in self._loads

    # invocation -------------------------------------------------------------------------

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
        started = self.clock()
        resident, outcome = await self._acquire(name)
        try:
            job = await self._answer(name, invocation)
        finally:
            self.memory.end_request(resident)
            if resident.in_flight == 0:  # only an idle model can make room for a waiting load
                self._notify()
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

    async def _answer(self, name: str, invocation: Invocation) -> Job[Invocation]:
        """Queue the request for the model's workers and wait for its answer or its deadline."""
        dispatcher = self.dispatchers[name]
        loop = asyncio.get_running_loop()
        job: Job[Invocation] = Job(invocation, loop.create_future(), self.clock())
        dispatcher.submit(job)
        expiry = loop.call_later(self.scheduling.response_timeout_s, self._expire, dispatcher, job)
        try:
            await job.future
        finally:
            expiry.cancel()
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

    async def _send_batch(self, name: str, worker: WorkerHandle, batch: list[Job[Any]]) -> None:
        """One frame to the worker for the batch; each job gets its own answer or error."""
        live = [job for job in batch if not job.future.done()]  # skip those past their deadline
        if not live:
            return
        items = tuple(
            Item(
                job.request.content_type,
                job.request.accept,
                job.request.params,
                len(job.request.body),
            )
            for job in live
        )
        payload = b"".join(job.request.body for job in live)
        self.batching.count(len(live))
        reply = await self.pool.call(worker, Infer(name, items), Answered, payload, name)
        resolve_batch(live, *reply)

    async def _acquire(self, name: str) -> tuple[Resident, LoadOutcome | None]:
        """The loaded model with one more request in flight, loading it first if need be."""
        outcome = None
        for _ in range(MAX_ACQUIRE_ATTEMPTS):
            self._check_open()
            resident = self.memory.get(name)
            if resident is not None and resident.state is State.LOADED:
                self.memory.begin_request(resident)
                self._revalidate_in_background(name)
                return resident, outcome
            outcome = await self.ensure_loaded(name)
        raise Unavailable(
            f"model {name} was unloaded {MAX_ACQUIRE_ATTEMPTS} times before it "
            "could serve this request: the memory budget is too small for the "
            "traffic; raise --memory-budget"
        )

    def _worker_of(self, resident: Resident) -> WorkerHandle:
        worker = self.pool.workers.get(resident.worker_id or -1)
        if worker is None:
            raise Unavailable(f"the worker holding model {resident.name} has gone; retry is safe")
        return worker

    # loading ----------------------------------------------------------------------------

    async def ensure_loaded(self, name: str) -> LoadOutcome:
        """Load `name` unless already loading; concurrent callers share one load."""
        task = self._loads.get(name)
        if task is None:
            task = asyncio.ensure_future(self._load(name))
            self._loads[name] = task
            task.add_done_callback(lambda _: self._loads.pop(name, None))
        return await asyncio.shield(task)

    def source_of(self, name: str) -> str:
        return self.sources.get(name) or self.disk.stores.url_of(name)

    async def _load(self, name: str) -> LoadOutcome:
        await self._departed(name)
        try:
            found = await self.disk.materialize(name, self.source_of(name))
        except ModelhostError as error:
            self.events.emit("failure", name, reason="fetch", detail={"error": str(error)})
            raise
        started = self.clock()
        artifact = found.artifact
        manifest = self._read_manifest(name, artifact)
        resident = await self._make_room(name, self._reservation(name, artifact, manifest))
        try:
            await self._load_on_worker(resident, artifact)
        except BaseException as error:
            self._forget(resident)
            self.events.emit("failure", name, reason="load", detail={"error": repr(error)})
            raise
        await self.relieve_pressure()
        return LoadOutcome(found.tier, (self.clock() - started) * 1000, found.download_ms)

    async def _departed(self, name: str) -> None:
        """Wait until an earlier incarnation of `name` has left its workers (they key by name)."""
        await self._until(lambda: self.memory.get(name) is None and not self._copies_leaving(name))

    def _copies_leaving(self, name: str) -> bool:
        return any(model == name for model, _ in self._leaving)

    async def _until(self, condition: Callable[[], bool]) -> None:
        """Wait until `condition` holds, looking again at each change `_notify` announces."""
        while not condition():
            await self._changed.wait()

    async def _load_on_worker(self, resident: Resident, artifact: Artifact) -> None:
        name = resident.name
        worker = least_loaded(self.pool.workers.values(), self.memory)
        loaded = await self._load_copy(name, artifact, worker, "invoked")
        footprint = max(MIN_FOOTPRINT_BYTES, loaded.footprint)
        footprint = max(footprint, self.manifest_of(name).memory_bytes or 0)
        self.footprints[name] = footprint
        if not worker.alive:  # it died after answering: the model went with it
            raise Unavailable(f"the worker loading model {name} died; retry is safe")
        self.memory.mark_loaded(name, worker.worker_id, footprint, loaded.load_ms)
        self.dispatchers[name] = self._dispatcher(name, loaded.batches)
        self.dispatchers[name].add(worker, self.scheduling.slots_per_worker)

    async def _load_copy(
        self, name: str, artifact: Artifact, worker: WorkerHandle, reason: str
    ) -> Loaded:
        loaded, _ = await self.pool.call(
            worker, self._load_request(name, artifact), Loaded, model=name
        )
        self.events.emit(
            "load",
            name,
            bytes=max(MIN_FOOTPRINT_BYTES, loaded.footprint),
            duration_ms=round(loaded.load_ms, 2),
            worker=worker.worker_id,
            reason=reason,
        )
        return loaded

    def _dispatcher(self, name: str, handler_batches: bool) -> Dispatcher:
        """The model's queue and batcher, with its manifest's settings over the server's."""
        manifest, settings = self.manifest_of(name), self.scheduling
        delay_ms = manifest.max_batch_delay_ms
        queue: BatchQueue[Invocation] = BatchQueue(
            name,
            settings.job_queue_size,
            settings.batch_size(manifest.batch_size, handler_batches),
            (settings.max_batch_delay_ms if delay_ms is None else delay_ms) / 1000,
            self.clock,
        )
        send = functools.partial(self._send_batch, name)
        return Dispatcher(queue, send, functools.partial(self._scale_out, name))

    # scaling ----------------------------------------------------------------------------

    def _scale_out(self, name: str) -> None:
        """Requests wait for a free worker: load one more copy if the budget and limit allow."""
        resident = self.memory.get(name)
        artifact = self.disk.artifacts.get(name)
        if name in self._scaling or self.closing or resident is None or artifact is None:
            return
        spare = [
            w
            for w in self.pool.workers.values()
            if w.worker_id not in resident.workers and (name, w.worker_id) not in self._leaving
        ]
        if len(resident.workers) >= self._max_copies(name) or resident.state is not State.LOADED:
            return
        dispatcher = self.dispatchers.get(name)
        if dispatcher is None or dispatcher.busy_share() < SCALE_OUT_BUSY_SHARE:
            return
        if not spare or not self.memory.reserve_copy(resident):
            return
        worker = least_loaded(spare, self.memory)
        task = asyncio.ensure_future(self._add_copy(resident, artifact, worker))
        self._scaling[name] = task
        task.add_done_callback(lambda _: self._scaling.pop(name, None))

    def _max_copies(self, name: str) -> int:
        limit = self.manifest_of(name).max_workers
        return limit or self.scheduling.max_workers_per_model or len(self.pool.workers)

    async def _add_copy(self, resident: Resident, artifact: Artifact, worker: WorkerHandle) -> None:
        name = resident.name
        try:
            await self._load_copy(name, artifact, worker, "scale_out")
        except ModelhostError as error:
            self.memory.release_copy(resident)
            self.events.emit("failure", name, reason="scale_out", detail={"error": str(error)})
            return
        dispatcher = self.dispatchers.get(name)
        if not self._is_current(resident) or dispatcher is None or not worker.alive:
            self.memory.release_copy(resident)  # unloaded (or its worker died) meanwhile
            await self._unload_copy(name, worker.worker_id)
            return
        resident.workers.append(worker.worker_id)
        dispatcher.add(worker, self.scheduling.slots_per_worker)

    async def scale_in(self) -> None:
        """Unload one extra copy of each model that has not waited for a worker lately."""
        now = self.clock()
        for name, dispatcher in list(self.dispatchers.items()):
            resident = self.memory.get(name)
            if resident is None or len(resident.workers) < 2 or name in self._scaling:
                continue
            if now - dispatcher.pressed_at >= self.scheduling.scale_in_idle_s:
                dispatcher.pressed_at = now  # one copy per idle period
                await self._drop_copy(resident, dispatcher)

    async def _drop_copy(self, resident: Resident, dispatcher: Dispatcher) -> int:
        """Drain and unload the least busy extra copy; the bytes its worker freed."""
        extra = [dispatcher.replicas[w] for w in resident.workers[1:] if w in dispatcher.replicas]
        if not extra:
            return 0
        replica = min(extra, key=lambda r: r.busy)
        await dispatcher.drain(replica)
        worker_id = replica.worker.worker_id
        dispatcher.remove(worker_id)
        if not self._is_current(resident) or worker_id not in resident.workers:
            return 0  # evicted, or its worker died, meanwhile: that path unloads and counts it
        resident.workers.remove(worker_id)  # before the await: an eviction now skips this copy
        self._leaving.add((resident.name, worker_id))  # and no load lands there meanwhile
        try:
            return await self._unload_copy(resident.name, worker_id)
        finally:
            self._leaving.discard((resident.name, worker_id))
            self.memory.release_copy(resident)
            self._notify()

    async def _shed_copies(self, need_bytes: int) -> None:
        """Under memory pressure copies go first: unload idle extra copies, least recent first."""
        copied = [r for r in self.memory if r.state is State.LOADED and len(r.workers) > 1]
        for resident in sorted(copied, key=lambda r: r.last_used):
            dispatcher = self.dispatchers.get(resident.name)
            while need_bytes > 0 and dispatcher and len(resident.workers) > 1:
                extra = [dispatcher.replicas.get(w) for w in resident.workers[1:]]
                if all(replica is None or replica.busy for replica in extra):
                    break
                need_bytes -= resident.footprint
                await self._drop_copy(resident, dispatcher)

    async def _unload_copy(self, name: str, worker_id: int, reason: str = "scale_in") -> int:
        started = self.clock()
        freed = await self._unload_from(worker_id, name)
        self.events.emit(
            "unload",
            name,
            bytes=self.footprints.get(name),
            reason=reason,
            worker=worker_id,
            duration_ms=round((self.clock() - started) * 1000, 2),
            detail={"freed_bytes": freed},
        )
        return freed

    async def _unload_from(self, worker_id: int, name: str) -> int:
        """Unload one copy; the bytes its worker freed (0 if it died: the copy went with it)."""
        worker = self.pool.workers.get(worker_id)
        if worker is None:
            return 0
        try:
            unloaded, _ = await self.pool.call(worker, Unload(name), Unloaded, model=name)
        except ModelhostError:
            return 0
        return unloaded.freed

    # the model's manifest ------------------------------------------------------------------

    def manifest_of(self, name: str) -> Manifest:
        return self.manifests.get(name, NO_MANIFEST)

    def is_pinned(self, name: str) -> bool:
        return name in self.pinned or self.manifest_of(name).pinned

    def _read_manifest(self, name: str, artifact: Artifact) -> Manifest:
        try:
            manifest = read_manifest(artifact.path)
        except ModelLoadError as error:
            error = ModelLoadError(f"could not load model {name}: {error}")
            self.events.emit("failure", name, reason="manifest", detail={"error": str(error)})
            raise error from None
        self.manifests[name] = manifest
        return manifest

    def _reservation(self, name: str, artifact: Artifact, manifest: Manifest) -> int:
        """Bytes to reserve: the declared size, else the last measured or the estimate."""
        if manifest.memory_bytes is not None:
            return manifest.memory_bytes
        return max(self.footprints.get(name, 0), estimate_footprint(artifact.bytes))

    def _load_request(self, name: str, artifact: Artifact) -> Load:
        """The worker's load request: the artifact, and what the manifest tells the worker."""
        manifest, path = self.manifest_of(name), str(artifact.path)
        if not (manifest.handler or manifest.model_file or manifest.warmup):
            return Load(name, path)
        root = str(manifest_root(artifact.path))
        return Load(name, path, root, manifest.handler, manifest.model_file, tuple(manifest.warmup))

    # making room ------------------------------------------------------------------------

    async def _make_room(self, name: str, size: int) -> Resident:
        """Reserve `size` for `name`, unloading victims first; the new record, loading."""
        if not self.memory.fits_ever(size):
            raise InsufficientMemory(self._never_fits(name, size))
        self.memory.observe(self.pss_bytes())
        await self._shed_copies(self.memory.committed_bytes + size - self.memory.budget_bytes)
        deadline = self.clock() + self.deadline_s
        while (victims := self.memory.reserve(name, size, self.is_pinned(name))) is None:
            changed = self._changed
            remaining = deadline - self.clock()
            if remaining <= 0:
                raise InsufficientMemory(self._all_busy(name, size))
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except asyncio.TimeoutError:
                continue
        resident = self.memory.get(name)
        assert resident is not None  # reserved just now, and only this load task owns the name
        await self._unload_many(victims, "evict", "lru")
        return resident

    def _never_fits(self, name: str, size: int) -> str:
        m = self.memory
        return (
            f"{self._needs(name, size)} leaves {format_bytes(m.capacity_bytes)} for models "
            f"(the idle server uses {format_bytes(m.baseline_bytes)}); set --memory-budget to at "
            f"least {format_bytes(m.baseline_bytes + size)}"
        )

    def _all_busy(self, name: str, size: int) -> str:
        return (
            f"{self._needs(name, size)} is held by models that stayed busy for "
            f"{self.deadline_s:g} s ({format_bytes(self.memory.committed_bytes)} committed); "
            "retry later or raise --memory-budget"
        )

    def _needs(self, name: str, size: int) -> str:
        budget = format_bytes(self.memory.budget_bytes)
        return f"model {name} needs about {format_bytes(size)} but the memory budget of {budget}"

    # unloading --------------------------------------------------------------------------

    async def unload(self, name: str, reason: str = "requested") -> int:
        """Unload on request (DELETE); waits for in-flight requests; returns the bytes freed."""
        resident = self.memory.get(name)
        if resident is None or resident.state is not State.LOADED:
            raise ModelNotLoaded(f"model {name} is not loaded")
        resident.pinned = True  # keep eviction away while we wait for it to go idle
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._until(lambda: not resident.in_flight), self.deadline_s)
        if not self._is_current(resident) or resident.state is not State.LOADED:
            raise ModelNotLoaded(f"model {name} was unloaded while this request waited")
        self.memory.begin_unload(name)
        return await self._unload_one(resident, "unload", reason)

    async def _unload_many(self, victims: list[Resident], kind: str, reason: str) -> None:
        await asyncio.gather(*(self._unload_one(victim, kind, reason) for victim in victims))

    async def _unload_one(self, resident: Resident, kind: str, reason: str) -> int:
        """Unload every copy of a model; one event for the model, with the bytes all freed."""
        started = self.clock()
        freed = 0
        scaling = self._scaling.get(resident.name)
        if scaling is not None:  # a copy on its way: it sees the model leaving and goes too
            await asyncio.wait([scaling])
        try:
            for worker_id in list(resident.workers):
                freed += await self._unload_from(worker_id, resident.name)
        finally:
            self._forget(resident)
        self.events.emit(
            kind,
            resident.name,
            bytes=resident.bytes,
            reason=reason,
            worker=resident.worker_id,
            duration_ms=round((self.clock() - started) * 1000, 2),
            detail={"freed_bytes": freed},
        )
        return freed

    async def unload_idle(self, idle_s: float) -> None:
        """Unload the models nobody has used for `idle_s` seconds (pinned ones stay)."""
        await self._unload_many(self.memory.idle_victims(idle_s), "unload", "idle")

    async def relieve_pressure(self) -> None:
        """Unload idle models while more is committed than the budget (a footprint grew)."""
        await self._unload_many(self.memory.overflow_victims(), "evict", "memory_pressure")

    def _worker_lost(self, worker: WorkerHandle) -> None:
        for resident in self.memory:
            if worker.worker_id not in resident.workers:
                continue  # a load under way there fails on its own, and forgets its record
            dispatcher = self.dispatchers.get(resident.name)
            if dispatcher is not None:
                dispatcher.remove(worker.worker_id)
            if len(resident.workers) > 1 or resident.state is State.UNLOADING:
                resident.workers.remove(worker.worker_id)  # other copies carry on
                self.memory.release_copy(resident)
            else:
                self._forget(resident)
            self.events.emit(
                "unload",
                resident.name,
                bytes=resident.footprint,
                reason="worker_died",
                worker=worker.worker_id,
            )
        self._notify()

    def _is_current(self, resident: Resident) -> bool:
        """Still the record of its name (not unloaded and perhaps loaded again since)."""
        return self.memory.get(resident.name) is resident

    def _forget(self, resident: Resident) -> None:
        """The model is out of memory: drop its record and fail requests still waiting for it."""
        name = resident.name
        if not self._is_current(resident):
            return  # an earlier incarnation's step finishing late: the name is someone else's
        self.memory.remove(name)
        dispatcher = self.dispatchers.pop(name, None)
        if dispatcher is not None:
            dispatcher.fail_waiting(
                Unavailable(f"model {name} was unloaded while this request waited; retry is safe")
            )
        self._notify()

    # management -------------------------------------------------------------------------

    async def register_and_load(self, name: str, url: str) -> LoadOutcome:
        """POST /models: load `name` from `url`, which `allowed_urls` must admit."""
        if name in self.memory.residents or name in self._loads:
            raise ModelAlreadyLoaded(
                f"model {name} is already loaded; DELETE /models/{name} first to load it again"
            )
        self.sources[name] = self.disk.stores.admit(url)
        return await self.ensure_loaded(name)

    def register(self, name: str, url: str) -> None:
        """Remember `url` as the source of `name` without loading it (TorchServe's 0 workers)."""
        if self.is_registered(name):
            raise ModelAlreadyLoaded(
                f"model {name} is already registered; unregister it first to register it again"
            )
        self.sources[name] = self.disk.stores.admit(url)

    async def unregister(self, name: str) -> None:
        """Unload `name` if it is loaded, and forget the URL it was registered with."""
        resident = self.memory.get(name)
        if resident is not None and resident.state is State.LOADED:
            await self.unload(name)
        self.sources.pop(name, None)

    def is_registered(self, name: str) -> bool:
        """Registered with a URL, loaded or loading: what TorchServe's API calls registered."""
        return name in self.sources or name in self.memory.residents or name in self._loads

    def _revalidate_in_background(self, name: str) -> None:
        """Check a loaded model's artifact against the store when due; unload it if replaced."""
        if name in self._revalidations or not self.disk.revalidation_due(name):
            return
        task = asyncio.ensure_future(self._revalidate_loaded(name))
        self._revalidations[name] = task
        task.add_done_callback(lambda _: self._revalidations.pop(name, None))

    async def _revalidate_loaded(self, name: str) -> None:
        if await self.disk.revalidate(name):
            with contextlib.suppress(ModelhostError):
                await self.unload(name, reason="stale")

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _check_open(self) -> None:
        if self.closing:
            raise ShuttingDown("the server is shutting down; retry on another instance")

    def model_names(self) -> list[str]:
        return sorted(set(self.memory.residents) | set(self.disk.artifacts) | set(self.sources))

    def stats(self) -> dict[str, Any]:
        """The budgets and what holds them, for operators and tests."""
        m, d = self.memory, self.disk
        return {
            "memory": {
                "budgetBytes": m.budget_bytes,
                "baselineBytes": m.baseline_bytes,
                "committedBytes": m.committed_bytes,
                "pssBytes": self.pss_bytes(),
                "loadedModels": sum(r.state is State.LOADED for r in m),
            },
            "disk": {"budgetBytes": d.budget_bytes, "usedBytes": d.used_bytes},
            "workers": [
                {"id": w.worker_id, "pid": w.pid, "inFlight": len(w.pending)}
                for w in self.pool.workers.values()
            ],
        }

    def pss_bytes(self) -> int:
        """The whole server's memory as the OS measures it: frontend, template and workers."""
        return server_pss_bytes(self.pool.pids())

    def describe(self, name: str) -> dict[str, Any]:
        from modelhost.observe.describe import describe_model

        return describe_model(self, name)


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
