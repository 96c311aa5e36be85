"""What the host needs of the worker pool and of the disk tier, so a test's fake can stand in.

The real ones are `modelhost.workers.pool.WorkerPool` and `modelhost.cache.disk.DiskTier`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Protocol

from modelhost.cache.disk import Artifact, Materialized
from modelhost.cache.fast_copies import FastCopies, Offer
from modelhost.cache.stores import Stores
from modelhost.workers.handle import Waiter, WorkerHandle
from modelhost.workers.messages import Request
from modelhost.workers.replies import ReplyT


class Pool(Protocol):
    """Workers by id, and calls to them."""

    threads: int  # each worker's inference threads
    load_timeout_s: float  # a load's deadline, for models without their own

    @property
    def workers(self) -> Mapping[int, WorkerHandle]: ...

    def pids(self) -> list[int]: ...

    def health(self) -> tuple[int, int]: ...

    def retire(self, worker: WorkerHandle) -> None: ...

    def attach(
        self, on_lost: Callable[[WorkerHandle], None], on_joined: Callable[[], None]
    ) -> None: ...

    def send(
        self,
        worker: WorkerHandle,
        request: Request,
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> Waiter: ...

    async def call(
        self,
        worker: WorkerHandle,
        request: Request,
        expect: type[ReplyT],
        payload: bytes = b"",
        model: str = "",
        timeout_s: float | None = None,
    ) -> tuple[ReplyT, bytes]: ...


class Revalidating(Protocol):
    """Whether a cached artifact is due a check against its store, and the check."""

    def due(self, name: str) -> bool: ...

    async def check(self, name: str) -> bool: ...


class Disk(Protocol):
    """Artifacts fetched into the cache folder, by model name."""

    @property
    def stores(self) -> Stores: ...

    @property
    def revalidation(self) -> Revalidating: ...

    @property
    def fast_copies(self) -> FastCopies: ...

    @property
    def budget_bytes(self) -> int: ...

    @property
    def used_bytes(self) -> int: ...

    async def materialize(self, name: str, url: str, tenant: str = "") -> Materialized: ...

    def tenant_bytes(self) -> dict[str, int]:
        """The bytes of entries each tenant holds."""

    async def version(self, url: str) -> str: ...

    def get(self, name: str) -> Artifact | None: ...

    def names(self, after: str = "", limit: int = 100) -> list[str]: ...

    def sources(self, after: str = "", limit: int = 100) -> list[tuple[str, str]]: ...

    def count(self) -> int: ...

    def offer_fast_copy(self, artifact: Artifact) -> Offer | None: ...

    def delete(self, name: str, reason: str) -> None: ...

    def note_runtimes(self, name: str, runtimes: tuple[str, ...]) -> None:
        """The runtimes `name` needed at its load: the next start preloads them."""

    def attach(self, in_use: Callable[[str], bool]) -> None: ...

    def close(self) -> None: ...
