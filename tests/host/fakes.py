"""Fakes of the host's side effects: a worker pool whose calls wait until a test answers them,
a disk tier with every model on it already, a clock that moves when told, and events dropped."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.cache.disk import Artifact, Materialized
from modelhost.cache.fast_copies import FastCopies, Offer
from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.stores import Stores
from modelhost.errors import ModelNotLoaded, WorkerDied
from modelhost.host import Invocation, ModelHost
from modelhost.manifest import Manifest
from modelhost.records.events import Event, EventLog
from modelhost.scheduler import SchedulerSettings
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import (
    Answer,
    Answered,
    Infer,
    Load,
    Loaded,
    Reply,
    Request,
    Unload,
    Unloaded,
)
from modelhost.workers.replies import ReplyT

MiB = 2**20
NO_TRANSPORT = asyncio.WriteTransport()  # the host never writes to a worker itself
NAMES = ("a", "b", "c", "d")
ARTIFACT_BYTES = 10 * MiB  # reserved at 2x + 64 KiB before the first load
FOOTPRINT_BYTES = 12 * MiB  # what a load measures
PEAK_SHARE = 1.5  # what a load needs while it runs (unpickling), as the worker measures it
BUDGET_BYTES = 64 * MiB  # room for two or three models, not all four
POOL_SIZE = 2
INVOCATION = Invocation(b"[1]", "application/json", "")


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(eq=False)
class FakeWorker(WorkerHandle):
    """A worker handle with no process behind it, and the models it holds."""

    models: set[str] = field(default_factory=set)


def fake(worker: WorkerHandle) -> FakeWorker:
    """A handle the host got from a fake pool."""
    assert isinstance(worker, FakeWorker), worker
    return worker


@dataclass
class Call:
    worker: FakeWorker
    request: Request
    future: asyncio.Future[tuple[Reply, bytes]]


def footprint_of(name: str) -> int:
    return FOOTPRINT_BYTES


class FakePool:
    """Calls wait until the machine answers them; a worker that dies fails its calls."""

    def __init__(self, size: int, footprint: Callable[[str], int] = footprint_of) -> None:
        self.footprint = footprint
        self.threads = 1
        self.load_timeout_s = 300.0
        self._ids = itertools.count(1)
        self.workers: dict[int, FakeWorker] = {}
        self.calls: list[Call] = []
        self.violations: list[str] = []
        self.pure = False  # what loads say of their handler
        self.loaded_extra: dict[str, Any] = {}  # more of what loads say (a subclass's)
        self._on_lost: Callable[[WorkerHandle], None] = lambda worker: None
        self._on_joined: Callable[[], None] = lambda: None
        self.size = size
        for _ in range(size):
            self.spawn()

    def attach(
        self, on_lost: Callable[[WorkerHandle], None], on_joined: Callable[[], None]
    ) -> None:
        self._on_lost, self._on_joined = on_lost, on_joined

    def spawn(self) -> None:
        worker = FakeWorker(next(self._ids), 0, NO_TRANSPORT, 0.0)
        self.workers[worker.worker_id] = worker
        self._on_joined()

    def pids(self) -> list[int]:
        return []

    def health(self) -> tuple[int, int]:
        return len(self.workers), self.size

    def retire(self, worker: WorkerHandle) -> None:
        self.violations.append(f"worker {worker.worker_id} retired: no test has tenants apart")

    def send(
        self,
        handle: WorkerHandle,
        request: Request,
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> asyncio.Future[tuple[Reply, bytes]]:
        worker = fake(handle)
        if not worker.alive:
            raise WorkerDied(f"worker {worker.worker_id} has died; retry is safe")
        if isinstance(request, Load) and request.model in worker.models:
            self.violations.append(f"second load of {request.model} on {worker.worker_id}")
        future: asyncio.Future[tuple[Reply, bytes]] = asyncio.get_running_loop().create_future()
        self.calls.append(Call(worker, request, future))
        self.called(self.calls[-1])
        return future

    async def call(
        self,
        worker: WorkerHandle,
        request: Request,
        expect: type[ReplyT],
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> tuple[ReplyT, bytes]:
        reply, body = await self.send(worker, request, payload, model=model, timeout_s=timeout_s)
        assert isinstance(reply, expect)
        return reply, body

    def called(self, call: Call) -> None:
        """A call was made; it waits for `answer` (a subclass may answer it here)."""

    def answer(self, call: Call) -> None:
        self.calls.remove(call)
        request, worker = call.request, call.worker
        reply: Reply
        if isinstance(request, Load):
            worker.models.add(request.model)
            name = request.model
            footprint, peak = self.footprint(name), self.peak(name)
            reply = Loaded(
                footprint=footprint,
                load_ms=1.0,
                batches=True,
                peak=peak,
                pure=self.pure,
                **self.loaded_extra,
            )
        elif isinstance(request, Unload):
            if request.model not in worker.models:
                missing = f"{request.model} not in {worker.worker_id}"
                call.future.set_exception(ModelNotLoaded(missing))
                return
            self.drop(worker, request.model)
            reply = Unloaded(self.footprint(request.model))
        else:
            if request.model not in worker.models:
                self.violations.append(
                    f"infer of {request.model} on {worker.worker_id}, lacking it"
                )
            answered = self.answered(call, request)
            call.future.set_result((answered, b"ok" * len(answered.answers)))
            return
        call.future.set_result((reply, b""))

    def drop(self, worker: FakeWorker, model: str) -> None:
        """`worker` lets `model` go (a subclass, what else it held of it too)."""
        worker.models.discard(model)

    def answered(self, call: Call, request: Infer) -> Answered:
        """An Infer's reply (a subclass adds what it measured)."""
        return Answered((Answer("text/plain", 2),) * len(request.items), 1.0)

    def peak(self, name: str) -> int:
        return int(self.footprint(name) * PEAK_SHARE)

    def held_bytes(self) -> int:
        """What the workers really hold: each model they hold, and each load under way at its
        peak."""
        held = sum(self.footprint(m) for worker in self.workers.values() for m in worker.models)
        loads = [c.request.model for c in self.calls if isinstance(c.request, Load)]
        return held + sum(self.peak(name) for name in loads)

    def kill(self, worker: FakeWorker, respawn: bool = True) -> None:
        """The worker dies; the template forks its successor at once, or later (`spawn`)."""
        worker.alive = False
        del self.workers[worker.worker_id]
        for call in [c for c in self.calls if c.worker is worker]:
            self.calls.remove(call)
            call.future.set_exception(WorkerDied(f"worker {worker.worker_id} died"))
        self._on_lost(worker)
        if respawn:
            self.spawn()


class NeverDue:
    """No artifact is ever due a check against its store."""

    def due(self, name: str) -> bool:
        return False

    async def check(self, name: str) -> bool:
        return False


class FakeDisk:
    """Every model is on disk already: the disk tier is not what this machine explores."""

    def __init__(self, root: Path, footprint: Callable[[str], int] = footprint_of) -> None:
        self.root = root
        self.footprint = footprint  # an artifact is to its footprint as ARTIFACT_BYTES is
        self._artifacts: dict[str, Artifact] = {}
        self.budget_bytes = 1 << 40
        self.stores = Stores(str(root))
        self.revalidation = NeverDue()
        self.fast_copies = FastCopies(root / "fast-copies")

    def attach(self, in_use: Callable[[str], bool]) -> None:
        """Nothing is ever deleted here, so nothing needs keeping."""

    def close(self) -> None:
        """No index to write."""

    async def materialize(self, name: str, url: str, tenant: str = "") -> Materialized:
        path = self.root / name
        path.touch()
        size = self.footprint(name) * ARTIFACT_BYTES // FOOTPRINT_BYTES
        self._artifacts[name] = Artifact(name, path, size)
        return Materialized(self._artifacts[name], "disk")

    def tenant_bytes(self) -> dict[str, int]:
        return {}

    async def version(self, url: str) -> str:
        return "1"  # never replaced: what a failed load would be remembered by

    def get(self, name: str) -> Artifact | None:
        return self._artifacts.get(name)

    def names(self, after: str = "", limit: int = 100) -> list[str]:
        return sorted(name for name in self._artifacts if name > after)[:limit]

    def count(self) -> int:
        return len(self._artifacts)

    @property
    def used_bytes(self) -> int:
        return sum(artifact.bytes for artifact in self._artifacts.values())

    def offer_fast_copy(self, artifact: Artifact) -> Offer | None:
        return None  # fast copies are the disk tier's and the worker's (tests/cache, e2e)

    def delete(self, name: str, reason: str) -> None:
        self._artifacts.pop(name, None)

    def note_runtimes(self, name: str, runtimes: tuple[str, ...]) -> None:
        """The next start's template is the worker pool's, not this machine's."""


class FakeEvents(EventLog):
    """Events dropped: the machine checks the records, not the log."""

    def emit(
        self, kind: str, model: str | None = None, *, per_model: bool = True, **fields: Any
    ) -> Event:
        return Event(kind, model)


def tmp_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="interleavings-")


class AnsweringPool(FakePool):
    """Answers each call as soon as it is made."""

    def called(self, call: Call) -> None:
        asyncio.get_running_loop().call_soon(self.respond, call)

    def respond(self, call: Call) -> None:
        self.answer(call)


class RecordedEvents(EventLog):
    """Each event's kind, model and fields, in the order emitted."""

    def __init__(self) -> None:
        super().__init__()
        self.emitted: list[tuple[str, str | None, dict[str, Any]]] = []

    def emit(
        self, kind: str, model: str | None = None, *, per_model: bool = True, **fields: Any
    ) -> Event:
        self.emitted.append((kind, model, fields))
        return Event(kind, model)


def host_with(
    pool: FakePool,
    tmp_path: Path,
    manifests: dict[str, Manifest],
    budget_bytes: int = 2**40,
    memory: MemoryTier | None = None,
    scheduling: SchedulerSettings | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> ModelHost:
    """A host on `pool` whose models declare `manifests` (no files read for them)."""
    memory = memory or MemoryTier(MemoryBudget(budget_bytes, 0))
    host = ModelHost(
        pool,
        memory,
        FakeDisk(tmp_path),
        RecordedEvents(),
        pinned=frozenset(),
        deadline_s=5.0,
        scheduling=scheduling,
        clock=clock,
        pss_bytes=lambda: memory.committed_bytes,
    )
    host.manifests.manifests.update(manifests)
    host.manifests.read = lambda name, artifact: host.manifests.of(name)  # type: ignore[method-assign]
    pool.attach(on_lost=host.residency.worker_lost, on_joined=host.changes.notify)
    return host
