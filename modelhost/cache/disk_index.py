"""The disk tier's index: one SQLite row per artifact, kept across restarts.

Triggers keep the totals, so a restart reads two numbers, not every row. A crash may lose the
last commits, which the reconciliation finds again.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

INDEX_FILE = "disk-index.sqlite3"
FETCH_ROWS = 16
MAX_PARAMETERS = 500  # per IN (...) query, below SQLite's oldest limit

SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    name TEXT PRIMARY KEY,
    entry TEXT,
    path TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    source TEXT NOT NULL,
    etag TEXT,
    checked_at REAL NOT NULL,
    last_used REAL NOT NULL
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

COLUMNS = "name, entry, path, bytes, source, etag, checked_at, last_used"
UPSERT = f"""
INSERT INTO artifacts ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name) DO UPDATE SET entry = excluded.entry, path = excluded.path,
    bytes = excluded.bytes, source = excluded.source, etag = excluded.etag,
    checked_at = excluded.checked_at, last_used = excluded.last_used
"""


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


class DiskIndex:
    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=True)
        self.connection.execute("PRAGMA journal_mode = WAL")
        self.connection.execute("PRAGMA synchronous = NORMAL")
        self.connection.executescript(SCHEMA)
        self.rows, self.entry_bytes = 0, 0
        self._read_totals()

    def close(self) -> None:
        self.connection.close()

    def _read_totals(self) -> None:
        self.rows, self.entry_bytes = self.connection.execute(
            "SELECT rows, entry_bytes FROM totals"
        ).fetchone()

    # rows -------------------------------------------------------------------------------

    def get(self, name: str) -> Row | None:
        found = self.connection.execute(
            f"SELECT {COLUMNS} FROM artifacts WHERE name = ?", (name,)
        ).fetchone()
        return Row(*found) if found else None

    def put(self, row: Row) -> None:
        self.connection.execute(UPSERT, row)
        self._read_totals()

    def put_many(self, rows: Iterable[Row]) -> None:
        with self._transaction():
            self.connection.executemany(UPSERT, rows)
        self._read_totals()

    def remove(self, name: str) -> None:
        self.connection.execute("DELETE FROM artifacts WHERE name = ?", (name,))
        self._read_totals()

    def touch(self, name: str, last_used: float) -> None:
        query = "UPDATE artifacts SET last_used = ? WHERE name = ?"
        self.connection.execute(query, (last_used, name))

    def vouch(self, name: str, checked_at: float) -> None:
        self.connection.execute(
            "UPDATE artifacts SET checked_at = ? WHERE name = ?", (checked_at, name)
        )

    # orders -----------------------------------------------------------------------------

    def names(self, after: str, limit: int) -> list[str]:
        query = "SELECT name FROM artifacts WHERE name > ? ORDER BY name LIMIT ?"
        return [name for (name,) in self.connection.execute(query, (after, limit))]

    def oldest_entries(self) -> Iterator[Row]:
        """Entries, least recently used first, read lazily."""
        cursor = self.connection.execute(
            f"SELECT {COLUMNS} FROM artifacts WHERE entry IS NOT NULL ORDER BY last_used"
        )
        try:
            while batch := cursor.fetchmany(FETCH_ROWS):
                yield from (Row(*found) for found in batch)
        finally:
            cursor.close()

    def entries_after(self, after: str, limit: int) -> list[tuple[str, str]]:
        query = (
            "SELECT name, entry FROM artifacts WHERE name > ? AND entry IS NOT NULL "
            "ORDER BY name LIMIT ?"
        )
        return list(self.connection.execute(query, (after, limit)))

    def known_folders(self, folders: list[str]) -> set[str]:
        known: set[str] = set()
        for start in range(0, len(folders), MAX_PARAMETERS):
            chunk = folders[start : start + MAX_PARAMETERS]
            marks = ", ".join("?" * len(chunk))
            query = f"SELECT entry FROM artifacts WHERE entry IN ({marks}) AND entry IS NOT NULL"
            known.update(entry for (entry,) in self.connection.execute(query, chunk))
        return known

    # facts of the cache -----------------------------------------------------------------

    def fact(self, key: str) -> int | None:
        found = self.connection.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if found is None else int(found[0])

    def set_fact(self, key: str, value: int) -> None:
        self.connection.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def _transaction(self) -> sqlite3.Connection:
        self.connection.execute("BEGIN")
        return self.connection  # as a context manager it commits or rolls back


def open_index(path: Path) -> DiskIndex:
    """The index at `path`; an unreadable one is set aside and the folders taken back."""
    try:
        return DiskIndex(path)
    except sqlite3.DatabaseError:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                Path(f"{path}{suffix}").rename(f"{path}.unreadable{suffix}")
        return DiskIndex(path)
