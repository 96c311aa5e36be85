"""The disk index's writes, applied in order on a thread of their own.

Another process may hold the index's lock, and SQLite's wait for it must not hold up the event
loop. Writes go in one transaction per batch. A write someone awaits fails if its batch fails;
the others stay queued, in order, and are retried until they apply.
"""

from __future__ import annotations

import contextlib
import queue
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.errors import DiskIndexLocked, ShuttingDown

BUSY_TIMEOUT_S = 0.25  # a second server's own writes take less; a held lock costs no more
RETRY_S = 1.0  # between tries of writes left queued by a lock
SQLITE_BUSY = 5  # the primary result code; Python 3.10 has no constant for it


@dataclass(frozen=True)
class Write:
    """A statement to run for each of `rows`; `done` if someone waits, else kept until applied."""

    sql: str
    rows: Sequence[Sequence[Any]]
    done: Future[None] | None = None
    removes: str | None = None  # the name whose row it deletes
    places: str | None = None  # the name of the row read in place it writes


def is_locked(error: sqlite3.Error) -> bool:
    """Whether SQLite gave up waiting for a lock another connection holds."""
    code = getattr(error, "sqlite_errorcode", None)
    if code is None:  # Python 3.10: SQLite's fixed text for SQLITE_BUSY
        return str(error) == "database is locked"
    return bool(code & 0xFF == SQLITE_BUSY)


def locked_error(path: Path) -> DiskIndexLocked:
    return DiskIndexLocked(
        f"the disk cache's index {path.name} is locked by another process (a sqlite3 shell, a "
        "backup, or a second server on the same --cache-dir), so no new model can be cached; "
        "end that process's transaction, and give each server its own --cache-dir. Models "
        "already loaded or on disk are served meanwhile"
    )


class IndexWriter:
    """One thread that owns the index's writing connection."""

    def __init__(
        self,
        connection: sqlite3.Connection,
        path: Path,
        on_commit: Callable[[sqlite3.Connection, list[Write]], None],
    ) -> None:
        self.connection, self.path = connection, path
        self.on_commit = on_commit  # on this thread, before the futures resolve
        self._queue: queue.SimpleQueue[Write | None] = queue.SimpleQueue()
        self._kept: list[Write] = []  # queued before the lock, in order
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="disk-index", daemon=True)
        self._thread.start()

    def submit(self, write: Write) -> None:
        if not self._stopped:
            self._queue.put(write)
        elif write.done is not None:  # a write nobody waits for is lost, as at a crash
            write.done.set_exception(ShuttingDown("the disk cache's index is closed"))

    def stop(self) -> None:
        """Apply what is queued if the lock allows, then end the thread; does not wait."""
        self._stopped = True
        self._queue.put(None)

    def close(self) -> int:
        """`stop` and wait; returns the writes the lock left unapplied."""
        self.stop()
        self._thread.join()
        return len(self._kept)

    def _run(self) -> None:
        open_ = True
        while open_:
            batch, open_ = self._next_batch()
            if batch:
                self._apply(batch)
        self.connection.close()

    def _next_batch(self) -> tuple[list[Write], bool]:
        """What is kept and queued; waits for a write, or until the next try of kept ones."""
        batch, self._kept = self._kept, []
        try:
            first = self._queue.get(timeout=RETRY_S if batch else None)
        except queue.Empty:
            return batch, True
        for write in self._drained(first):
            if write is None:
                return batch, False
            batch.append(write)
        return batch, True

    def _drained(self, first: Write | None) -> Iterator[Write | None]:
        yield first
        with contextlib.suppress(queue.Empty):
            while True:
                yield self._queue.get_nowait()

    def _apply(self, batch: list[Write]) -> None:
        """All of `batch` in one transaction; a failure fails the awaited and keeps the rest."""
        batch = [w for w in batch if w.done is None or w.done.set_running_or_notify_cancel()]
        try:
            with self._transaction():
                for write in batch:
                    if write.rows:
                        self.connection.executemany(write.sql, write.rows)
        except Exception as error:  # the thread lives on; its callers get the error
            locked = isinstance(error, sqlite3.Error) and is_locked(error)
            self._kept = [w for w in batch if w.done is None]
            for write in batch:
                if write.done is not None:
                    write.done.set_exception(locked_error(self.path) if locked else error)
            return
        self.on_commit(self.connection, batch)
        for write in batch:
            if write.done is not None:
                write.done.set_result(None)

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[None]:
        self.connection.execute("BEGIN IMMEDIATE")  # takes the lock now, or waits for it here
        try:
            yield
            self.connection.execute("COMMIT")
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
