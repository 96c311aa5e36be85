"""The disk tier: artifacts ready to load, within the disk budget.

An entry is built in a ``.tmp-`` folder and renamed into place only when whole, so a crash
leaves no half-written artifact that looks whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import os
import secrets
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from modelhost.cache.disk_budget import DiskBudget, Reservation
from modelhost.cache.disk_index import open_cache
from modelhost.cache.download import DownloadPolicy
from modelhost.cache.entries import (
    ENTRY_FILE,
    TEMP_PREFIX,
    Artifact,
    artifact_of,
    entry_folder_name,
    has_any,
    remove_tree,
    row_of,
    tree_bytes,
    write_record,
)
from modelhost.cache.fast_copies import FOLDER, FastCopies, Offer, identity
from modelhost.cache.filling import Filling, Unpackers, UnpackLimits
from modelhost.cache.missing import MissingUrls
from modelhost.cache.pickles import PICKLE_SUFFIXES, refuse_pickles
from modelhost.cache.quotas import Limits, no_limits, weights_of
from modelhost.cache.reconcile import BUDGET_FACT, Reconciliation
from modelhost.cache.revalidation import Revalidation
from modelhost.cache.stores import ObjectInfo, Store, Stores
from modelhost.cache.stores.base import is_disk_full
from modelhost.cache.unpack import is_archive
from modelhost.errors import InsufficientDisk, ModelNotFound
from modelhost.fair_slots import FairSlots
from modelhost.records.events import EventLog
from modelhost.resources import usable_cores

__all__ = [
    "ENTRY_FILE",
    "Artifact",
    "DiskTier",
    "Materialized",
    "UnpackLimits",
    "entry_folder_name",
    "tree_bytes",
]

UNWRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)  # the cache's volume, not the request
RECORD_SPARE_BYTES = 256  # for the ETag and times not known yet


@dataclass(frozen=True)
class Materialized:
    """An artifact ready for a load, and whether this request downloaded it."""

    artifact: Artifact
    tier: str  # "disk" or "remote"
    download_ms: float = 0.0


class DiskTier:
    """Owns the cache folder: artifacts fetched, unpacked, budgeted and revalidated."""

    def __init__(
        self,
        cache_dir: Path,
        budget_bytes: int,
        *,
        stores: Stores,
        events: EventLog,
        limits: UnpackLimits,
        policy: DownloadPolicy,
        revalidate_interval_s: float = 0.0,
        clock: Callable[[], float] = time.time,
        why_untrusted: Callable[[str], str] = lambda name: "",
        tenant_limits: Limits = no_limits,
    ) -> None:
        self.why_untrusted = why_untrusted  # "": a trusted model, whose pickles may load
        self.entries_dir = cache_dir / "models"
        self.stores, self.events, self.limits, self.policy = stores, events, limits, policy
        self.clock = clock
        self.index = open_cache(cache_dir)
        self._run = f"{os.getpid()}-{secrets.token_hex(3)}"
        self._own_prefix = f"{TEMP_PREFIX}{self._run}-"  # the scan skips this run's folders
        self._publishing: set[str] = set()  # renamed into place, rows not yet put
        self.fast_copies = FastCopies(cache_dir / FOLDER)
        self.budget = DiskBudget(
            budget_bytes,
            index=self.index,
            fast_copies=self.fast_copies,
            entries_dir=self.entries_dir,
            own_prefix=self._own_prefix,
            events=events,
            limits=tenant_limits,
        )
        self.revalidation = Revalidation(
            self.index,
            stores=stores,
            events=events,
            interval_s=revalidate_interval_s,
            clock=clock,
            delete=self.budget.delete,
        )
        self.reconciliation = self._reconciliation(0, counting=False)
        self.reconciliation.done = True  # nothing to reconcile before `rebuild`
        weight = weights_of(tenant_limits)
        self._download_slots = FairSlots(stores.settings.max_concurrent_downloads, weight=weight)
        self._unpackers = Unpackers(max(1, usable_cores() // 2), weight)
        self.missing = MissingUrls()

    def attach(self, in_use: Callable[[str], bool]) -> None:
        """Keep the files of models `in_use`; the host built on this tier supplies it."""
        self.budget.in_use = in_use

    def close(self) -> None:
        self.reconciliation.stop()
        self._unpackers.close()
        left = self.index.close()
        if left:
            detail = {"writes_left": left, "error": "the disk index was locked at stop"}
            self.events.emit("failure", reason="disk_index", detail=detail)

    # what it holds ----------------------------------------------------------------------

    @property
    def budget_bytes(self) -> int:
        return self.budget.budget_bytes

    @property
    def used_bytes(self) -> int:
        return self.budget.used_bytes

    @property
    def free_bytes(self) -> int:
        return self.budget.free_bytes

    def get(self, name: str) -> Artifact | None:
        row = self.index.get(name)
        return artifact_of(row, self.entries_dir) if row else None

    def names(self, after: str = "", limit: int = 100) -> list[str]:
        return self.index.names(after, limit)

    def sources(self, after: str = "", limit: int = 100) -> list[tuple[str, str]]:
        return self.index.sources(after, limit)

    def count(self) -> int:
        return self.index.rows

    def tenant_bytes(self) -> dict[str, int]:
        """The bytes of entries each tenant holds; "" is the server's own."""
        return self.index.held_by_tenant()

    # start ------------------------------------------------------------------------------

    def rebuild(self) -> None:
        """Take back a previous run's cache: the index now, the folders in the background."""
        self.entries_dir.mkdir(parents=True, exist_ok=True)
        aside = self.entries_dir / f"{TEMP_PREFIX}fast-copies-{self._run}"
        copies_left = self.fast_copies.set_aside(aside)
        previous = self.index.fact(BUDGET_FACT) or self.budget_bytes
        self.index.set_fact(BUDGET_FACT, max(previous, self.budget_bytes))  # until reconciled
        held = copies_left or has_any(self.entries_dir)
        unreconciled = max(0, previous - self.index.entry_bytes) if held else 0
        self.reconciliation = self._reconciliation(unreconciled, counting=held)
        with contextlib.suppress(RuntimeError):  # no loop: the first `reconcile` starts it
            self.reconciliation.start(asyncio.get_running_loop())

    def _reconciliation(self, unreconciled_bytes: int, counting: bool) -> Reconciliation:
        self.budget.reconciliation = Reconciliation(
            self.index,
            entries_dir=self.entries_dir,
            own_prefix=self._own_prefix,
            set_aside=self.budget.set_aside,
            publishing=self._publishing,
            unreconciled_bytes=unreconciled_bytes,
            budget_bytes=self.budget_bytes,
            events=self.events,
            counting=counting,
        )
        return self.budget.reconciliation

    async def reconcile(self) -> None:
        """Wait until the index and the folders agree."""
        await self.reconciliation.finished()

    async def settled(self) -> None:
        """Wait until every folder deleted so far is gone."""
        await self.budget.settled()

    def note_runtimes(self, name: str, runtimes: tuple[str, ...]) -> None:
        self.index.note_runtimes(name, runtimes)

    def delete(self, name: str, reason: str) -> None:
        """Delete `name`'s entry and fast copy; a file read in place stays."""
        self.budget.delete(name, reason)

    # lookup -----------------------------------------------------------------------------

    async def materialize(self, name: str, url: str, tenant: str = "") -> Materialized:
        row = self.index.get(name) or await self.reconciliation.found(name)
        artifact = artifact_of(row, self.entries_dir) if row else None
        if artifact is not None and (artifact.source != url or not artifact.path.exists()):
            self.delete(name, reason="source_changed")
            artifact = None
        if artifact is not None and not (row and await self.revalidation.stale(row)):
            artifact.last_used = self.clock()
            self.index.touch(name, artifact.last_used)
            return self._admitted(name, Materialized(artifact, "disk"))
        store, key = self.stores.locate(url)
        local = store.local_path(key)
        if local is not None and not await asyncio.to_thread(is_archive, local):
            size = await asyncio.to_thread(tree_bytes, local)
            now = self.clock()
            read_in_place = Artifact(name, local, size, source=url, last_used=now)
            self.index.put_later(row_of(read_in_place))  # outside the budget: a lock may wait
            return self._admitted(name, Materialized(read_in_place, "disk"))
        entry = await self._fetch_entry(name, url, store, key, local, tenant=tenant)
        return self._admitted(name, entry)

    def _admitted(self, name: str, materialized: Materialized) -> Materialized:
        if why := self.why_untrusted(name):
            refuse_pickles(name, materialized.artifact.path, why)
        return materialized

    async def _fetch_entry(
        self, name: str, url: str, store: Store, key: str, local: Path | None, tenant: str
    ) -> Materialized:
        self.missing.check(url)
        try:
            return await self._build_entry(name, url, store, key, local, tenant=tenant)
        except ModelNotFound as error:
            if local is None:  # asking a remote store again costs a request
                self.missing.remember(url, error)
            raise

    async def version(self, url: str) -> str:
        """The artifact's size and ETag now, or its identity on disk where read in place."""
        store, key = self.stores.locate(url)
        local = store.local_path(key)
        if local is not None:
            return await asyncio.to_thread(identity, url, None, local)
        info = await store.stat(key)
        return f"{info.size}:{info.etag}"

    def offer_fast_copy(self, artifact: Artifact) -> Offer | None:
        """Its fast copy or room for one; not for a folder read in place, whose identity lags."""
        path = artifact.path
        if artifact.entry is None and not path.name.lower().endswith(PICKLE_SUFFIXES):
            return None
        try:
            key = identity(artifact.source, artifact.etag, path)
        except OSError:  # gone since: the load will say so
            return None
        return self.fast_copies.offer(artifact.name, key, artifact.bytes, self.free_bytes)

    # building an entry ------------------------------------------------------------------

    async def _build_entry(
        self, name: str, url: str, store: Store, key: str, local: Path | None, tenant: str = ""
    ) -> Materialized:
        """Download and unpack into a new entry for `tenant`; a full volume costs the fast
        copies first."""
        try:
            return await self._build_once(name, url, store, key, local, tenant=tenant)
        except OSError as error:
            if error.errno in UNWRITABLE and self._in_cache(error.filename):
                raise InsufficientDisk(
                    f"the disk cache cannot be written ({error.strerror}) to hold model {name}: "
                    "make the --cache-dir volume writable by the server's user"
                ) from error
            if not is_disk_full(error):
                raise
            if self.budget.drop_fast_copies():
                return await self._build_entry(name, url, store, key, local, tenant=tenant)
            raise InsufficientDisk(
                f"the cache's volume is full while writing model {name} ({error.strerror}); free "
                "space on it, or set --disk-budget below what it can hold"
            ) from error

    def _in_cache(self, filename: object) -> bool:
        cache = self.entries_dir.parent
        return isinstance(filename, str) and Path(filename).is_relative_to(cache)

    async def _build_once(
        self, name: str, url: str, store: Store, key: str, local: Path | None, tenant: str
    ) -> Materialized:
        await self.reconciliation.counted()  # folders not found yet may hold room
        await self.index.written()  # a locked index fails the build before its download
        reservation = Reservation(tenant)
        self.budget.reservations.add(reservation)
        self.entries_dir.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=self._own_prefix, dir=self.entries_dir))
        try:
            record_bytes = len(json.dumps({"name": name, "source": url})) + RECORD_SPARE_BYTES
            await self.budget.grow_async(reservation, name, record_bytes, record_bytes)
            filling = Filling(name, reservation, self.budget, self.events)
            info, download_ms, source = ObjectInfo(None), 0.0, local
            if source is None:
                source = temp / PurePosixPath(key.partition("?")[0]).name  # no presigned query
                slots = self._download_slots
                info, download_ms = await filling.download(store, key, source, self.policy, slots)
            payload = source
            if await asyncio.to_thread(is_archive, source):
                payload = await filling.unpack(source, temp / "model", self.limits, self._unpackers)
                if local is None:
                    source.unlink()
            artifact = await self._published(name, url, info, temp, payload, tenant=tenant)
            return Materialized(artifact, "disk" if local else "remote", download_ms)
        finally:
            await self.budget.released(reservation, temp)

    async def _published(
        self, name: str, url: str, info: ObjectInfo, temp: Path, payload: Path, tenant: str
    ) -> Artifact:
        folder = entry_folder_name(name)
        self._publishing.add(folder)
        try:
            artifact = await asyncio.to_thread(
                self._publish, name, url, info=info, temp=temp, payload=payload
            )
            await self._indexed(artifact, tenant)
        finally:
            self._publishing.discard(folder)
        return artifact

    async def _indexed(self, artifact: Artifact, tenant: str) -> None:
        """Put its row, or take its folder back out: the index never holds less than the disk."""
        try:
            await self.index.put(row_of(artifact)._replace(tenant=tenant))
        except BaseException:
            assert artifact.entry is not None
            aside = self.budget.set_aside(artifact.entry)
            if aside is not None:
                await asyncio.to_thread(remove_tree, aside)
            raise

    def _publish(
        self, name: str, url: str, *, info: ObjectInfo, temp: Path, payload: Path
    ) -> Artifact:
        now = self.clock()
        write_record(
            temp, Artifact(name, payload, 0, entry=temp, source=url, etag=info.etag, checked_at=now)
        )
        temp.chmod(0o755)  # mkdtemp makes it private
        entry = self.entries_dir / entry_folder_name(name)
        left = self.budget.set_aside(entry)  # an earlier folder the index did not know
        if left is not None:
            remove_tree(left)
        temp.rename(entry)
        path = entry / payload.relative_to(temp)
        return Artifact(
            name,
            path,
            tree_bytes(entry),
            entry=entry,
            source=url,
            etag=info.etag,
            checked_at=now,
            last_used=now,
        )
