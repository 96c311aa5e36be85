"""Which worker a model may use: trusted models the trusted workers, and each sandboxed worker
one untrusted tenant's models only, read from its own view (workers/views.py).

Models in one process can reach each other, so untrusted tenants are kept apart by process: a
sandboxed worker takes the tenant of the first model it loads, and once that tenant's models
have left it is replaced by a fresh fork, never handed on. Under --refuse-pickle without tenants
by name, every model is one tenant's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import msgspec

from modelhost.cache.entries import entry_folder_name
from modelhost.cache.memory import MemoryTier, Resident
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Load
from modelhost.workers.views import Views

Evict = Callable[[list[Resident]], Awaitable[None]]


class Sandboxes:
    """The tenants of the sandboxed workers, and what each worker may read."""

    def __init__(
        self,
        memory: MemoryTier,
        why_untrusted: Callable[[str], str],
        tenant_of: Callable[[str], str],
        views: Views | None = None,
    ) -> None:
        self.memory, self.why_untrusted, self.tenant_of = memory, why_untrusted, tenant_of
        self.views = views
        self.size = 0  # sandboxed workers the pool keeps, as most seen at once
        self.evict: Evict | None = None  # unloads models: the residency's, once it exists

    def attach(self, evict: Evict) -> None:
        """How to unload models, once the residency exists."""
        self.evict = evict

    def allows(self, worker: WorkerHandle, name: str) -> bool:
        """Whether `worker` may host `name`: an untrusted model only a sandboxed worker of its
        tenant's, or of none yet."""
        untrusted = bool(self.why_untrusted(name))
        if worker.untrusted != untrusted or worker.retiring:
            return False
        return not untrusted or worker.tenant in (None, self.tenant_of(name))

    def take(self, worker: WorkerHandle, name: str) -> None:
        """`worker` is to load `name`: a sandboxed one is its tenant's from now on."""
        if worker.untrusted:
            worker.tenant = self.tenant_of(name)

    def to_free(
        self, name: str, workers: Iterable[WorkerHandle], busy: set[int]
    ) -> WorkerHandle | None:
        """Where every sandboxed worker hosts other tenants' models, the one least recently
        used; None when one is free for `name`'s tenant, or will be."""
        if not self.why_untrusted(name):
            return None
        sandboxed = [worker for worker in workers if worker.untrusted]
        self.size = max(self.size, len(sandboxed))
        tenant = self.tenant_of(name)
        coming = len(sandboxed) < self.size  # a replacement not joined yet
        if coming or any(w.tenant in (None, tenant) or w.retiring for w in sandboxed):
            return None
        held = [worker for worker in sandboxed if worker.worker_id not in busy]
        return min(held, key=self.last_used, default=None)

    def last_used(self, worker: WorkerHandle) -> float:
        return max((r.last_used for r in self.hosted(worker)), default=0.0)

    def hosted(self, worker: WorkerHandle) -> list[Resident]:
        return [resident for resident in self.memory if worker.worker_id in resident.workers]

    async def empty(self, worker: WorkerHandle) -> None:
        """Unload every model `worker` hosts, so that it can be replaced for another tenant."""
        worker.retiring = True  # no load goes to it meanwhile
        if self.evict is not None:
            await self.evict(self.hosted(worker))

    async def request(self, worker: WorkerHandle, request: Load) -> Load:
        """The load as `worker` reads it: from its view where it is sandboxed, saying why."""
        if not worker.untrusted:
            return request
        request = msgspec.structs.replace(request, untrusted=self.why_untrusted(request.model))
        if self.views is None:
            return request
        shown = await asyncio.to_thread(
            self.views.show,
            worker.pid,
            entry_folder_name(request.model),
            request.path,
            request.root,
        )
        return msgspec.structs.replace(request, path=shown[0], root=shown[1])

    async def left(self, worker: WorkerHandle, name: str) -> None:
        """`name` left `worker`, or failed to load there: its artifact leaves the view."""
        if worker.untrusted and self.views is not None:
            await asyncio.to_thread(self.views.hide, worker.pid, entry_folder_name(name))
