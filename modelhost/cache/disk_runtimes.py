"""The runtimes each cached model needed at its last load, in a `runtimes` column of the disk
index, so the next start's worker template imports them before it forks (launch.py).

The column is outside the upsert's: an artifact fetched again keeps its runtimes. An index of an
earlier version gains it at start, empty.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

ADD_COLUMN = "ALTER TABLE artifacts ADD COLUMN runtimes TEXT NOT NULL DEFAULT ''"
SET_RUNTIMES = "UPDATE artifacts SET runtimes = ? WHERE name = ?"
DISTINCT_RUNTIMES = "SELECT DISTINCT runtimes FROM artifacts WHERE runtimes != ''"
SEPARATOR = ","


def migrate_runtimes(connection: sqlite3.Connection) -> None:
    """The runtimes column, on an index of any version."""
    columns = {row[1] for row in connection.execute("PRAGMA table_info(artifacts)")}
    if "runtimes" not in columns:
        connection.execute(ADD_COLUMN)


def joined(runtimes: tuple[str, ...]) -> str:
    return SEPARATOR.join(runtimes)


def cached_runtimes(path: Path) -> tuple[str, ...]:
    """The runtimes the models of the index at `path` needed, sorted; none if it is unreadable.

    Read-only and without waiting: the template starts before the disk tier opens the index.
    """
    if not path.is_file():
        return ()
    try:
        connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", 0, uri=True)
        with contextlib.closing(connection):
            found = connection.execute(DISTINCT_RUNTIMES).fetchall()
    except sqlite3.Error:  # locked, broken or earlier: the disk tier sorts it out
        return ()
    return tuple(sorted({name for (value,) in found for name in value.split(SEPARATOR)}))
