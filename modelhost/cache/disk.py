"""The disk tier: artifacts ready to load, within the disk budget.

Plain files and folders in a local store are read in place and cost the cache nothing. Archives
are unpacked into ``CACHE_DIR/unpacked/``, counted against the budget, and deleted least recently
used first (never while their model is in memory) when an unpack needs room. On restart the tier is
rebuilt from what is there; an unpack is renamed into place only when complete, so a crash never
leaves a half-unpacked folder that looks whole.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from modelhost.cache.store import LocalStore
from modelhost.cache.unpack import is_archive, unpack_archive
from modelhost.config import format_bytes
from modelhost.errors import InsufficientDisk
from modelhost.observe.events import EventLog


@dataclass(eq=False)
class Artifact:
    name: str
    path: Path
    bytes: int
    cached: bool  # True when it lives in the cache dir and counts against the budget
    last_used: float = 0.0


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


class DiskTier:
    def __init__(
        self,
        cache_dir: Path,
        budget_bytes: int,
        store: LocalStore,
        events: EventLog,
        max_unpacked_bytes: int,
        max_unpacked_files: int,
        in_memory: Callable[[str], bool] = lambda name: False,
    ) -> None:
        self.unpacked_dir = cache_dir / "unpacked"
        self.budget_bytes = budget_bytes
        self.store = store
        self.events = events
        self.limits = (max_unpacked_bytes, max_unpacked_files)
        self.in_memory = in_memory
        self.artifacts: dict[str, Artifact] = {}

    @property
    def used_bytes(self) -> int:
        return sum(a.bytes for a in self.artifacts.values() if a.cached)

    def rebuild(self) -> None:
        """Take back what a previous run unpacked; drop half-finished temporary folders."""
        self.unpacked_dir.mkdir(parents=True, exist_ok=True)
        for path in self.unpacked_dir.iterdir():
            if path.name.startswith(".tmp-"):
                shutil.rmtree(path, ignore_errors=True)
                continue
            name = unquote(path.name)
            self.artifacts[name] = Artifact(
                name, path, tree_bytes(path), True, path.stat().st_mtime
            )

    async def materialize(self, name: str, source: str) -> Artifact:
        """The artifact of `name` (stored at `source`), unpacked if need be, ready to load."""
        artifact = self.artifacts.get(name)
        if artifact is None or not artifact.path.exists():
            artifact = await self._prepare(name, self.store.resolve(source))
            self.artifacts[name] = artifact
        artifact.last_used = time.time()
        return artifact

    async def _prepare(self, name: str, path: Path) -> Artifact:
        if not is_archive(path):
            return Artifact(name, path, await asyncio.to_thread(tree_bytes, path), False)
        started = time.perf_counter()
        dest = self.unpacked_dir / quote(name, safe="")
        max_bytes, max_files = self.limits
        await asyncio.to_thread(
            unpack_archive, path, dest, max_bytes=max_bytes, max_files=max_files
        )
        artifact = Artifact(name, dest, await asyncio.to_thread(tree_bytes, dest), True)
        self.events.emit(
            "unpack",
            name,
            bytes=artifact.bytes,
            reason="archive",
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        self._make_room(artifact)
        return artifact

    def _make_room(self, incoming: Artifact) -> None:
        excess = self.used_bytes + incoming.bytes - self.budget_bytes
        for victim in sorted(self._deletable(), key=lambda a: a.last_used):
            if excess <= 0:
                break
            self.delete(victim.name, reason="disk_budget")
            excess -= victim.bytes
        if excess > 0:
            shutil.rmtree(incoming.path, ignore_errors=True)
            raise InsufficientDisk(
                f"model {incoming.name} unpacks to {format_bytes(incoming.bytes)} but the disk "
                f"budget is {format_bytes(self.budget_bytes)} with "
                f"{format_bytes(self.used_bytes)} held by models in memory; raise --disk-budget"
            )

    def _deletable(self) -> list[Artifact]:
        return [a for a in self.artifacts.values() if a.cached and not self.in_memory(a.name)]

    def delete(self, name: str, reason: str) -> None:
        artifact = self.artifacts.pop(name, None)
        if artifact is not None and artifact.cached:
            shutil.rmtree(artifact.path, ignore_errors=True)
            self.events.emit("delete", name, bytes=artifact.bytes, reason=reason)
