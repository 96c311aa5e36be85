"""The disk tier's index: one SQLite row per artifact, kept across restarts.

Triggers keep the totals, so a restart reads two numbers, not every row. A crash may lose the
last commits, and a stop while another process holds the lock the queued writes; the
reconciliation finds both again.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, NamedTuple

from modelhost.cache.disk_runtimes import SET_RUNTIMES, joined, migrate_runtimes
from modelhost.cache.disk_tenants import OLDEST_OF_TENANT, TENANTS_HELD, migrate
from modelhost.cache.index_writer import BUSY_TIMEOUT_S, IndexWriter, Write, is_locked, locked_error
from modelhost.errors import ConfigError

INDEX_FILE = "disk-index.sqlite3"
FETCH_ROWS = 16
MAX_PARAMETERS = 500  # per IN (...) query, below SQLite's oldest limit
OPEN_TIMEOUT_S = 5.0  # at start nothing is served yet: a backup may finish meanwhile

SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    name TEXT PRIMARY KEY,
    entry TEXT,
    path TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    source TEXT NOT NULL,
    etag TEXT,
    checked_at REAL NOT NULL,
    last_used REAL NOT NULL,
    tenant TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entries_by_last_used ON artifacts (last_used) WHERE entry IS NOT NULL;
CREATE INDEX IF NOT EXISTS entries_by_folder ON artifacts (entry) WHERE entry IS NOT NULL;
CREATE TABLE IF NOT EXISTS totals (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    rows INTEGER NOT NULL,
    entry_bytes INTEGER NOT NULL
);
INSERT OR IGNORE INTO totals VALUES (1, 0, 0);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TRIGGER IF NOT EXISTS counted_insert AFTER INSERT ON artifacts BEGIN
    UPDATE totals SET rows = rows + 1,
        entry_bytes = entry_bytes + CASE WHEN NEW.entry IS NULL THEN 0 ELSE NEW.bytes END;
END;
CREATE TRIGGER IF NOT EXISTS counted_delete AFTER DELETE ON artifacts BEGIN
    UPDATE totals SET rows = rows - 1,
        entry_bytes = entry_bytes - CASE WHEN OLD.entry IS NULL THEN 0 ELSE OLD.bytes END;
END;
CREATE TRIGGER IF NOT EXISTS counted_update AFTER UPDATE OF entry, bytes ON artifacts BEGIN
    UPDATE totals SET entry_bytes = entry_bytes
        + CASE WHEN NEW.entry IS NULL THEN 0 ELSE NEW.bytes END
        - CASE WHEN OLD.entry IS NULL THEN 0 ELSE OLD.bytes END;
END;
"""

COLUMNS = "name, entry, path, bytes, source, etag, checked_at, last_used, tenant"
UPSERT = f"""
INSERT INTO artifacts ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET entry = excluded.entry, path = excluded.path,
    bytes = excluded.bytes, source = excluded.source, etag = excluded.etag,
    checked_at = excluded.checked_at, last_used = excluded.last_used, tenant = excluded.tenant
"""
TOTALS = "SELECT rows, entry_bytes FROM totals"
SET_FACT = "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value"


class Row(NamedTuple):
    """An artifact as the index stores it."""

    name: str
    entry: str | None  # None: read in place
    path: str  # relative to the entry, else absolute
    bytes: int
    source: str
    etag: str | None
    checked_at: float
    last_used: float
    tenant: str = ""  # whose load fetched it; "": the server's own, or a previous version's


class Totals:
    """Rows and bytes of entries, in all and by tenant, as of the last commit, less the
    removals queued since.

    The writer's thread updates it as it commits, under the same lock as the readers take, so
    a removal never counts twice nor not at all.
    """

    def __init__(self, connection: sqlite3.Connection) -> None:
        self._lock = threading.Lock()
        self._rows, self._entry_bytes = connection.execute(TOTALS).fetchone()
        self._tenants: dict[str, int] = dict(connection.execute(TENANTS_HELD).fetchall())
        self._removing: dict[str, int] = {}  # queued removals: name, bytes of its entry
        self._removing_bytes = 0
        self._removing_tenants: dict[str, str] = {}  # queued removals: name, its tenant
        self._placing: dict[str, Row] = {}  # queued rows of files read in place

    def __contains__(self, name: str) -> bool:
        """Whether `name`'s removal is queued."""
        return name in self._removing

    def removals(self) -> frozenset[str]:
        """The removals queued now: taken before a read, they cover every row its snapshot
        holds that a removal since committed (the commit forgets the name only after)."""
        with self._lock:
            return frozenset(self._removing)

    @property
    def rows(self) -> int:
        with self._lock:
            return int(self._rows) - len(self._removing)

    @property
    def entry_bytes(self) -> int:
        with self._lock:
            return int(self._entry_bytes) - self._removing_bytes

    def removing(self, row: Row) -> None:
        with self._lock:
            self._removing[row.name] = 0 if row.entry is None else row.bytes
            self._removing_bytes += self._removing[row.name]
            self._removing_tenants[row.name] = row.tenant

    def placing(self, row: Row) -> None:
        with self._lock:
            self._placing[row.name] = row

    def placed(self, name: str) -> Row | None:
        """`name`'s row read in place, queued and not yet committed."""
        with self._lock:
            return self._placing.get(name)

    def of_tenant(self, tenant: str) -> int:
        """The bytes of `tenant`'s entries."""
        with self._lock:
            removing = (self._removing[n] for n, t in self._removing_tenants.items() if t == tenant)
            return self._tenants.get(tenant, 0) - sum(removing)

    def by_tenant(self) -> dict[str, int]:
        """The bytes of entries each tenant holds."""
        with self._lock:
            held = dict(self._tenants)
            for name, tenant in self._removing_tenants.items():
                held[tenant] = held.get(tenant, 0) - self._removing[name]
        return {tenant: value for tenant, value in held.items() if value > 0}

    def committed(self, connection: sqlite3.Connection, batch: list[Write]) -> None:
        """On the writer's thread, after each commit."""
        rows, entry_bytes = connection.execute(TOTALS).fetchone()
        tenants = dict(connection.execute(TENANTS_HELD).fetchall())
        with self._lock:
            self._rows, self._entry_bytes, self._tenants = rows, entry_bytes, tenants
            for write in batch:
                if write.removes is not None:
                    self._removing_bytes -= self._removing.pop(write.removes, 0)
                    self._removing_tenants.pop(write.removes, None)
                if write.places is not None and self._placing.get(write.places) is write.rows[0]:
                    del self._placing[write.places]


def _removed(name: str, removing: frozenset[str], totals: Totals) -> bool:
    """Queued for removal when a read began, or since."""
    return name in removing or name in totals


class DiskIndex:
    """Reads on the caller's thread, never waiting for a lock; writes on the writer's thread.

    A row whose removal is queued reads as gone at once.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        writing = sqlite3.connect(
            path, OPEN_TIMEOUT_S, isolation_level=None, check_same_thread=False
        )
        writing.execute("PRAGMA journal_mode = WAL")
        writing.execute("PRAGMA synchronous = NORMAL")
        writing.executescript(SCHEMA)
        migrate(writing)
        migrate_runtimes(writing)
        writing.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        self.connection = sqlite3.connect(path, 0, isolation_level=None)  # reads: a WAL never waits
        self.totals = Totals(self.connection)
        self.writer = IndexWriter(writing, path, self.totals.committed)
        self._stop = weakref.finalize(self, self.writer.stop)  # an index dropped unclosed

    @property
    def rows(self) -> int:
        return self.totals.rows

    @property
    def entry_bytes(self) -> int:
        return self.totals.entry_bytes

    def close(self) -> int:
        """Stop writing; returns the writes a lock kept from applying, which a restart redoes."""
        self._stop.detach()
        left = self.writer.close()
        self.connection.close()
        return left

    def _read(self, query: str, parameters: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self.connection.execute(query, parameters)
        except sqlite3.OperationalError as error:
            if is_locked(error):
                raise locked_error(self.path) from error
            raise

    # rows -------------------------------------------------------------------------------

    def get(self, name: str) -> Row | None:
        if name in self.totals:
            return None
        placed = self.totals.placed(name)
        if placed is not None:
            return placed
        found = self._read(f"SELECT {COLUMNS} FROM artifacts WHERE name = ?", (name,)).fetchone()
        return Row(*found) if found else None

    async def put(self, row: Row) -> None:
        """A row the budget must count: written before this returns, or DiskIndexLocked."""
        await asyncio.wrap_future(self._awaited(UPSERT, [row]))

    def put_later(self, row: Row) -> None:
        """A row outside the budget (a file read in place): reads as there at once, written when
        the lock allows."""
        self.totals.placing(row)
        self._keep(Write(UPSERT, [row], places=row.name))

    def put_many(self, rows: Iterable[Row]) -> None:
        """For tools outside the server's loop: blocks until written."""
        self._awaited(UPSERT, list(rows)).result()

    async def written(self) -> None:
        """Wait until every write so far is applied; DiskIndexLocked while another holds it."""
        await asyncio.wrap_future(self._awaited("", []))

    def remove(self, name: str) -> None:
        """Reads as gone at once, and its bytes no longer count."""
        row = self.get(name)
        if row is not None:
            self.totals.removing(row)
            self._keep(Write("DELETE FROM artifacts WHERE name = ?", [(name,)], removes=name))

    def touch(self, name: str, last_used: float) -> None:
        query = "UPDATE artifacts SET last_used = ? WHERE name = ?"
        self._keep(Write(query, [(last_used, name)]))

    def vouch(self, name: str, checked_at: float) -> None:
        query = "UPDATE artifacts SET checked_at = ? WHERE name = ?"
        self._keep(Write(query, [(checked_at, name)]))

    def note_runtimes(self, name: str, runtimes: tuple[str, ...]) -> None:
        """The runtimes `name` needed at its load, for the next start's template."""
        self._keep(Write(SET_RUNTIMES, [(joined(runtimes), name)]))

    def _keep(self, write: Write) -> None:
        """Queued, and tried again while the index is locked, until it applies."""
        self.writer.submit(write)

    def _awaited(self, sql: str, rows: Sequence[Sequence[Any]]) -> Future[None]:
        done: Future[None] = Future()
        self.writer.submit(Write(sql, rows, done))
        return done

    # orders -----------------------------------------------------------------------------

    def names(self, after: str, limit: int) -> list[str]:
        return [name for name, _ in self.sources(after, limit)]

    def sources(self, after: str, limit: int) -> list[tuple[str, str]]:
        """`names`, each with the URL its entry came from."""
        removing = self.totals.removals()
        query = "SELECT name, source FROM artifacts WHERE name > ? ORDER BY name LIMIT ?"
        found = self._read(query, (after, limit + len(removing)))
        return [(name, source) for name, source in found if name not in removing][:limit]

    def oldest_entries(self) -> Iterator[Row]:
        """Entries, least recently used first, read lazily."""
        removing = self.totals.removals()
        cursor = self._read(
            f"SELECT {COLUMNS} FROM artifacts WHERE entry IS NOT NULL ORDER BY last_used"
        )
        try:
            while batch := cursor.fetchmany(FETCH_ROWS):
                yield from (Row(*f) for f in batch if not _removed(f[0], removing, self.totals))
        finally:
            cursor.close()

    def oldest_entries_of(self, tenant: str) -> Iterator[Row]:
        """`tenant`'s entries, least recently used first, read lazily."""
        removing = self.totals.removals()
        cursor = self._read(OLDEST_OF_TENANT.format(columns=COLUMNS), (tenant,))
        try:
            while batch := cursor.fetchmany(FETCH_ROWS):
                yield from (Row(*f) for f in batch if not _removed(f[0], removing, self.totals))
        finally:
            cursor.close()

    def tenant_bytes(self, tenant: str) -> int:
        """The bytes of `tenant`'s entries."""
        return self.totals.of_tenant(tenant)

    def held_by_tenant(self) -> dict[str, int]:
        """The bytes of entries each tenant holds."""
        return self.totals.by_tenant()

    def entries_after(self, after: str, limit: int) -> list[tuple[str, str]]:
        query = (
            "SELECT name, entry FROM artifacts WHERE name > ? AND entry IS NOT NULL "
            "ORDER BY name LIMIT ?"
        )
        return list(self._read(query, (after, limit)))

    def known_folders(self, folders: list[str]) -> set[str]:
        known: set[str] = set()
        for start in range(0, len(folders), MAX_PARAMETERS):
            chunk = folders[start : start + MAX_PARAMETERS]
            marks = ", ".join("?" * len(chunk))
            query = f"SELECT entry FROM artifacts WHERE entry IN ({marks}) AND entry IS NOT NULL"
            known.update(entry for (entry,) in self._read(query, chunk))
        return known

    # facts of the cache -----------------------------------------------------------------

    def fact(self, key: str) -> int | None:
        found = self._read("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if found is None else int(found[0])

    def set_fact(self, key: str, value: int) -> None:
        self._keep(Write(SET_FACT, [(key, value)]))


def open_index(path: Path) -> DiskIndex:
    """The index at `path`; an unreadable one is set aside and the folders taken back."""
    try:
        return DiskIndex(path)
    except sqlite3.DatabaseError as error:
        if is_locked(error):  # held, not broken: setting it aside would split the cache
            raise locked_error(path) from None
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{path}{suffix}").rename(f"{path}.unreadable{suffix}")
        return DiskIndex(path)


def open_cache(cache_dir: Path) -> DiskIndex:
    """The cache folder's index, the folder made if need be; an unusable one stops the start."""
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        return open_index(cache_dir / INDEX_FILE)
    except (OSError, sqlite3.Error) as error:
        raise ConfigError(
            f"cannot use the cache folder {cache_dir}: {error}; set --cache-dir to a folder "
            "this user can write"
        ) from None
