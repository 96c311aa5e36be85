"""The disk tier: artifacts ready to load, within the disk budget.

Plain files and folders in a local store are read in place and cost the cache nothing. Everything
else becomes an entry under ``CACHE_DIR/models/``: a download from a remote store, an archive
unpacked (its download deleted once unpacked), and ``modelhost-entry.json`` saying which model,
from which URL, at which ETag. An entry is built in a ``.tmp-`` folder and renamed into place
only when whole and verified, so a crash never leaves a half-written artifact that looks whole;
on restart the tier is rebuilt from the entries and the temporary folders are dropped.

The budget is a hard limit. Bytes are reserved before they are written: the announced size
before a download, and in steps as an archive unpacks. Room is made by deleting the least
recently used entries of models that are not being loaded and whose loaded runtime (if any) does
not read them any more; when that cannot make enough, the model gets 507 with the figures.

A cached artifact whose load failed is deleted: a complete download may still be no model (an
HTML error page saved as model.joblib), and kept it would fail every load, across restarts too;
the next request downloads it again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from modelhost.cache.download import DownloadPolicy, download
from modelhost.cache.fast_copies import FOLDER, FastCopies, Offer, identity
from modelhost.cache.missing import MissingUrls
from modelhost.cache.pickles import PICKLE_SUFFIXES, refuse_pickles
from modelhost.cache.stores import ObjectInfo, Store, Stores
from modelhost.cache.stores.base import is_disk_full
from modelhost.cache.unpack import is_archive, unpack_archive
from modelhost.errors import InsufficientDisk, ModelNotFound, StoreError
from modelhost.records.events import EventLog
from modelhost.units import format_bytes
from modelhost.urls import redact_url

ENTRY_FILE = "modelhost-entry.json"
UNPACK_STEP_BYTES = 32 * 2**20  # room is made for an unpacking archive this much at a time
RECORD_SPARE_BYTES = 256  # in the record's reservation, for the ETag and times not known yet
MAX_ENTRY_NAME = 200
FAST = {"fast_copy": True}  # the detail of a fast copy's delete event


@dataclass(eq=False)
class Artifact:
    """A model's files on this machine: where the worker loads them, their size and origin."""

    name: str
    path: Path  # what the worker loads: a file or a folder
    bytes: int
    entry: Path | None = None  # its folder in the cache, counted against the budget; None: in place
    source: str = ""  # the normalized URL it came from
    etag: str | None = None
    checked_at: float = 0.0  # when the store last vouched for `etag`
    last_used: float = 0.0


@dataclass(frozen=True)
class Materialized:
    """An artifact made ready for a load, and whether this request had to download it."""

    artifact: Artifact
    tier: str  # "disk": it was on this machine; "remote": downloaded for this request
    download_ms: float = 0.0


@dataclass(frozen=True)
class UnpackLimits:
    """What unpacking one archive may write: bytes and files (a tar bomb stops at either)."""

    max_bytes: int
    max_files: int


class Reservation:
    """Bytes an entry under construction may write."""

    def __init__(self) -> None:
        self.bytes = 0


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def entry_folder_name(name: str) -> str:
    """A file name for a model's entry: the quoted name, or its digest when that is too long."""
    quoted = quote(name, safe="")
    return quoted if len(quoted) <= MAX_ENTRY_NAME else hashlib.sha256(name.encode()).hexdigest()


class DiskTier:
    """Owns the cache folder: artifacts fetched from the stores and unpacked, kept within the
    disk budget, revalidated against their store when due."""

    def __init__(
        self,
        cache_dir: Path,
        budget_bytes: int,
        stores: Stores,
        events: EventLog,
        limits: UnpackLimits,
        policy: DownloadPolicy,
        revalidate_interval_s: float = 0.0,
        clock: Callable[[], float] = time.time,
        refuse_pickle: bool = False,
    ) -> None:
        self.refuse_pickle = refuse_pickle
        self.entries_dir = cache_dir / "models"
        self.budget_bytes = budget_bytes
        self.stores, self.events, self.limits, self.policy = stores, events, limits, policy
        self.revalidate_interval_s = revalidate_interval_s
        self.clock = clock
        self._in_use: Callable[[str], bool] = lambda name: False  # until `attach`
        self.artifacts: dict[str, Artifact] = {}
        self._reservations: set[Reservation] = set()
        self._download_slots = asyncio.Semaphore(stores.settings.max_concurrent_downloads)
        self.missing = MissingUrls()
        self.fast_copies = FastCopies(cache_dir / FOLDER)

    def attach(self, in_use: Callable[[str], bool]) -> None:
        """Keep the files of each model `in_use` says must stay (it is loading, or its runtime may
        still read them). Called once by the composition root, when the host built on this tier
        exists."""
        self._in_use = in_use

    @property
    def used_bytes(self) -> int:
        cached = sum(a.bytes for a in self.artifacts.values() if a.entry)
        return cached + sum(r.bytes for r in self._reservations) + self.fast_copies.bytes

    def rebuild(self) -> None:
        """Take back the entries of a previous run; drop half-built ones."""
        self.entries_dir.mkdir(parents=True, exist_ok=True)
        self.fast_copies.reset()
        for folder in self.entries_dir.iterdir():
            artifact = None if folder.name.startswith(".tmp-") else read_entry(folder)
            if artifact is None:
                shutil.rmtree(folder, ignore_errors=True)
            else:
                self.artifacts[artifact.name] = artifact

    # lookup -----------------------------------------------------------------------------

    async def materialize(self, name: str, url: str) -> Materialized:
        """The artifact of model `name` from `url`, downloaded and unpacked if need be."""
        artifact = self.artifacts.get(name)
        if artifact is not None and (artifact.source != url or not artifact.path.exists()):
            self.delete(name, reason="source_changed")
            artifact = None
        if artifact is not None and not await self.revalidate(name):
            artifact.last_used = self.clock()
            return self._admitted(name, Materialized(artifact, "disk"))
        store, key = self.stores.locate(url)
        local = store.local_path(key)
        if local is not None and not await asyncio.to_thread(is_archive, local):
            size = await asyncio.to_thread(tree_bytes, local)
            materialized = Materialized(Artifact(name, local, size, source=url), "disk")
        else:
            materialized = await self._fetch_entry(name, url, store, key, local)
        materialized.artifact.last_used = self.clock()
        self.artifacts[name] = materialized.artifact
        return self._admitted(name, materialized)

    def _admitted(self, name: str, materialized: Materialized) -> Materialized:
        if self.refuse_pickle:
            refuse_pickles(name, materialized.artifact.path)
        return materialized

    async def _fetch_entry(
        self, name: str, url: str, store: Store, key: str, local: Path | None
    ) -> Materialized:
        """An entry built from the store, unless it said lately that `url` does not exist."""
        self.missing.check(url)
        try:
            return await self._build_entry(name, url, store, key, local)
        except ModelNotFound as error:
            if local is None:  # a remote store: asking again costs a request
                self.missing.remember(url, error)
            raise

    def offer_fast_copy(self, artifact: Artifact) -> Offer | None:
        """For a load of `artifact`: its fast copy to read, or free room to write one (see
        fast_copies). Not for a folder of a local store: a file rewritten inside it leaves the
        folder's identity as it was."""
        path = artifact.path
        if artifact.entry is None and not path.name.lower().endswith(PICKLE_SUFFIXES):
            return None
        try:
            key = identity(artifact.source, artifact.etag, path)
        except OSError:  # gone since it was materialized: the load will say so
            return None
        free = self.budget_bytes - self.used_bytes
        return self.fast_copies.offer(artifact.name, key, artifact.bytes, free)

    def revalidation_due(self, name: str) -> bool:
        artifact = self.artifacts.get(name)
        if not self.revalidate_interval_s or artifact is None or artifact.etag is None:
            return False
        return self.clock() - artifact.checked_at >= self.revalidate_interval_s

    async def revalidate(self, name: str) -> bool:
        """If due, ask the store for the artifact's ETag; delete a stale copy. True if stale.

        A store that cannot answer leaves the cached copy in service (SageMaker's behaviour).
        """
        if not self.revalidation_due(name):
            return False
        artifact = self.artifacts[name]
        artifact.checked_at = self.clock()
        store, key = self.stores.locate(artifact.source)
        try:
            etag = (await store.stat(key)).etag
        except (StoreError, ModelNotFound) as error:
            self.events.emit("failure", name, reason="revalidate", detail={"error": str(error)})
            return False
        if etag == artifact.etag:
            return False
        self.delete(name, reason="stale")
        return True

    # building an entry ------------------------------------------------------------------

    async def _build_entry(
        self, name: str, url: str, store: Store, key: str, local: Path | None
    ) -> Materialized:
        reservation = Reservation()
        self._reservations.add(reservation)
        self.entries_dir.mkdir(parents=True, exist_ok=True)
        temp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.entries_dir))
        try:
            record_bytes = len(json.dumps({"name": name, "source": url})) + RECORD_SPARE_BYTES
            self._grow(reservation, name, record_bytes, record_bytes)
            info, download_ms, source = ObjectInfo(None), 0.0, local
            if source is None:
                source = temp / PurePosixPath(key.partition("?")[0]).name  # no presigned query
                info, download_ms = await self._download(name, url, store, key, source, reservation)
            payload = source
            if await asyncio.to_thread(is_archive, source):
                payload = await self._unpack(name, source, temp / "model", reservation)
                if local is None:
                    source.unlink()
            artifact = await asyncio.to_thread(self._publish, name, url, info, temp, payload)
            return Materialized(artifact, "disk" if local else "remote", download_ms)
        except OSError as error:
            if not is_disk_full(error):
                raise
            raise InsufficientDisk(
                f"could not write model {name} into the cache at {self.entries_dir}: {error}; "
                "free space on that volume, or set --disk-budget below what it can hold"
            ) from error
        finally:
            self._reservations.discard(reservation)
            shutil.rmtree(temp, ignore_errors=True)

    async def _download(
        self, name: str, url: str, store: Store, key: str, dest: Path, reservation: Reservation
    ) -> tuple[ObjectInfo, float]:
        base = reservation.bytes

        def room_for(info: ObjectInfo) -> None:
            if info.size is not None:
                self._grow(reservation, name, base + info.size, base + info.size)

        slot = self._download_slots  # held while bytes flow, not while the store is asked
        done = await download(store, key, dest, self.policy, on_info=room_for, slot=slot)
        self._grow(reservation, name, base + done.bytes, base + done.bytes)
        self.events.emit(
            "download",
            name,
            bytes=done.bytes,
            duration_ms=round(done.duration_ms, 2),
            reason="miss",
            detail={
                "url": redact_url(url),
                "attempts": done.attempts,
                "bytes_per_s": round(done.bytes / max(done.duration_ms / 1000, 1e-6)),
            },
        )
        return done.info, done.duration_ms

    async def _unpack(self, name: str, archive: Path, dest: Path, reservation: Reservation) -> Path:
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        base = reservation.bytes

        def room_for(written: int) -> None:  # runs in the unpacking thread
            needed = base + written
            if needed > reservation.bytes:
                wanted = needed + UNPACK_STEP_BYTES
                grow = self._grow_async(reservation, name, needed, wanted)
                asyncio.run_coroutine_threadsafe(grow, loop).result()

        limits = self.limits
        await asyncio.to_thread(
            unpack_archive,
            archive,
            dest,
            max_bytes=limits.max_bytes,
            max_files=limits.max_files,
            on_bytes=room_for,
        )
        self.events.emit(
            "unpack",
            name,
            bytes=await asyncio.to_thread(tree_bytes, dest),
            reason="archive",
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return dest

    def _publish(
        self, name: str, url: str, info: ObjectInfo, temp: Path, payload: Path
    ) -> Artifact:
        """Write the entry's record and rename the folder into place (in a thread)."""
        now = self.clock()
        relative = payload.relative_to(temp).as_posix()
        record = {"name": name, "source": url, "etag": info.etag, "checked_at": now}
        (temp / ENTRY_FILE).write_text(json.dumps(record | {"payload": relative}))
        temp.chmod(0o755)  # mkdtemp made it private to this user
        entry = self.entries_dir / entry_folder_name(name)
        shutil.rmtree(entry, ignore_errors=True)
        temp.rename(entry)
        artifact = read_entry(entry)
        assert artifact is not None, f"{entry} was renamed into place whole"
        return artifact

    # the budget -------------------------------------------------------------------------

    async def _grow_async(
        self, reservation: Reservation, name: str, minimum: int, wanted: int
    ) -> None:
        self._grow(reservation, name, minimum, wanted)

    def _grow(self, reservation: Reservation, name: str, minimum: int, wanted: int) -> None:
        """Raise the reservation to at least `minimum` bytes, deleting entries if need be, and
        up to `wanted` where that fits without deleting any."""
        if minimum <= reservation.bytes:
            return
        deletable = sum(a.bytes for a in self._deletable()) + self.fast_copies.written_bytes
        held = self.used_bytes - deletable - reservation.bytes
        room = self.budget_bytes - held
        if room < minimum:
            raise InsufficientDisk(
                f"model {name} needs {format_bytes(minimum)} of disk but the disk budget is "
                f"{format_bytes(self.budget_bytes)} with {format_bytes(held)} held by models "
                "being fetched or loaded, or whose handlers read their files; raise --disk-budget"
            )
        free = self.budget_bytes - self.used_bytes + reservation.bytes
        target = max(minimum, min(wanted, free))  # delete only for what is needed now
        self._free(target - reservation.bytes)
        reservation.bytes = target

    def _free(self, extra: int) -> None:
        """Delete fast copies, then least recently used entries, until `extra` more bytes fit
        the budget."""
        for name in sorted(self.fast_copies.copies, key=self._last_used):
            if self.used_bytes + extra <= self.budget_bytes:
                return
            freed = self.fast_copies.drop(name)
            self.events.emit("delete", name, bytes=freed, reason="disk_budget", detail=FAST)
        for victim in sorted(self._deletable(), key=lambda a: a.last_used):
            if self.used_bytes + extra <= self.budget_bytes:
                return
            self.delete(victim.name, reason="disk_budget")

    def _last_used(self, name: str) -> float:
        artifact = self.artifacts.get(name)
        return artifact.last_used if artifact else 0.0

    def _deletable(self) -> list[Artifact]:
        return [a for a in self.artifacts.values() if a.entry and not self._in_use(a.name)]

    def delete(self, name: str, reason: str) -> None:
        """Delete `name`'s entry (an artifact read in place stays) and its fast copy."""
        freed = self.fast_copies.drop(name)
        if freed:
            self.events.emit("delete", name, bytes=freed, reason=reason, detail=FAST)
        artifact = self.artifacts.pop(name, None)
        if artifact is not None and artifact.entry is not None:
            shutil.rmtree(artifact.entry, ignore_errors=True)
            self.events.emit("delete", name, bytes=artifact.bytes, reason=reason)

    def names(self, after: str = "", limit: int = 100) -> list[str]:  # until the index lands
        return sorted(name for name in self.artifacts if name > after)[:limit]


def read_entry(folder: Path) -> Artifact | None:
    """The artifact an entry folder holds, or None if its record is missing or broken."""
    try:
        record: dict[str, Any] = json.loads((folder / ENTRY_FILE).read_text())
        payload = folder / record["payload"]
        if not payload.exists():
            return None
        return Artifact(
            record["name"],
            payload,
            tree_bytes(folder),
            folder,
            record["source"],
            record.get("etag"),
            record.get("checked_at", 0.0),
            folder.stat().st_mtime,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
