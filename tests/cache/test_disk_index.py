"""The disk index while another process holds its lock: the event loop runs on and reads answer;
a write someone awaits fails with DiskIndexLocked, the others wait their turn, in order, until
the lock ends; and the index never holds less than the disk."""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_disk_tier import KiB, disk_tier, fetch

from modelhost.cache import disk_index
from modelhost.cache.disk_index import INDEX_FILE, DiskIndex, Row, open_index
from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import DiskIndexLocked, ShuttingDown


@contextlib.contextmanager
def held(path: Path) -> Iterator[sqlite3.Connection]:
    """`path` locked by another connection, as `BEGIN EXCLUSIVE` in a sqlite3 shell does."""
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        yield other
    finally:
        other.close()


def row(name: str, entry: str | None = "folder", last_used: float = 0.0) -> Row:
    return Row(name, entry and f"{name}-{entry}", "model.joblib", KiB, "s3://b", None, 0, last_used)


def eventually(check: Callable[[], bool], timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check() and time.monotonic() < deadline:
        time.sleep(0.05)
    return check()


def test_an_awaited_write_fails_while_the_loop_runs_on(tmp_path: Path) -> None:
    """SQLite waits for the lock on the writer's thread: the loop ticks meanwhile."""
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.put_many([row("a")])

    async def ticks_during_a_locked_put() -> int:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        with pytest.raises(DiskIndexLocked, match="end that process's transaction"):
            await index.put(row("b"))
        ticker.cancel()
        return ticks

    with held(tmp_path / INDEX_FILE):
        assert asyncio.run(ticks_during_a_locked_put()) > 1
        assert index.get("a") == row("a") and index.get("b") is None  # reads answer
    asyncio.run(index.put(row("b")))
    assert index.get("b") == row("b") and index.entry_bytes == 2 * KiB
    index.close()


def test_writes_queued_while_locked_apply_in_order_once_it_ends(tmp_path: Path) -> None:
    """Removals read as gone at once; every queued write applies on its own after the lock."""
    path = tmp_path / INDEX_FILE
    index = DiskIndex(path)
    index.put_many([row("a"), row("b")])
    with held(path):
        index.touch("a", 5.0)
        index.remove("b")
        index.put_later(row("b", entry=None, last_used=7.0))  # after its removal
        index.set_fact("budget_bytes", 9)
        assert index.get("b") is None and index.names("", 10) == ["a"]
        assert (index.rows, index.entry_bytes) == (1, KiB)
    assert eventually(lambda: index.fact("budget_bytes") == 9)  # no write came to wake it
    assert index.get("a") == row("a", last_used=5.0)
    assert index.get("b") == row("b", entry=None, last_used=7.0)
    assert (index.rows, index.entry_bytes) == (2, KiB)  # the file read in place counts no bytes
    index.close()


def test_a_stop_while_locked_is_made_good_at_the_next_start(tmp_path: Path) -> None:
    """A removal the lock kept from the index: the restart's reconciliation drops the row."""
    store = MemoryStore({"a.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "a.joblib")
    with held(tmp_path / INDEX_FILE):
        tier.delete("a.joblib", reason="test")
        asyncio.run(tier.settled())
        tier.close()
    [failure] = [e for e in tier.events.recent if e.reason == "disk_index"]
    assert failure.detail == {"writes_left": 1, "error": "the disk index was locked at stop"}
    again = disk_tier(tmp_path, store)
    assert again.names() == [] and os.listdir(tmp_path / "models") == []


def test_a_locked_index_refuses_a_new_entry_before_its_download(tmp_path: Path) -> None:
    """Locked: a new entry is DiskIndexLocked with nothing fetched or left; an entry on disk is
    served and may be deleted. Unlocked: the new entry is fetched."""
    store = MemoryStore({"old.joblib": os.urandom(KiB), "new.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "old.joblib")
    with held(tmp_path / INDEX_FILE):
        with pytest.raises(DiskIndexLocked, match="--cache-dir"):
            fetch(tier, store, "new.joblib")
        assert fetch(tier, store, "old.joblib") == "disk"
        tier.delete("old.joblib", reason="test")
        assert tier.get("old.joblib") is None and tier.used_bytes == 0
    assert store.fetches == 1 and os.listdir(tmp_path / "models") == []
    assert fetch(tier, store, "new.joblib") == "remote"
    assert tier.names() == ["new.joblib"]


def test_a_lock_taken_during_a_build_takes_its_folder_back_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder is in place when the row cannot be put: it goes, so the budget holds."""
    store = MemoryStore({"new.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path, store)
    publish = tier._publish
    other = sqlite3.connect(tmp_path / INDEX_FILE, isolation_level=None, check_same_thread=False)

    def locked_after(*args: Any, **kwargs: Any) -> Any:
        published = publish(*args, **kwargs)
        other.execute("BEGIN EXCLUSIVE")
        return published

    monkeypatch.setattr(tier, "_publish", locked_after)
    with pytest.raises(DiskIndexLocked):
        fetch(tier, store, "new.joblib")
    assert os.listdir(tmp_path / "models") == [] and tier.used_bytes == 0
    other.close()
    monkeypatch.undo()
    assert fetch(tier, store, "new.joblib") == "remote"


def test_a_locked_index_at_start_is_not_taken_for_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second server on the same cache dir is refused, and the first one's index stays."""
    DiskIndex(tmp_path / INDEX_FILE).close()
    monkeypatch.setattr(disk_index, "OPEN_TIMEOUT_S", 0.05)
    with held(tmp_path / INDEX_FILE), pytest.raises(DiskIndexLocked, match="locked by another"):
        open_index(tmp_path / INDEX_FILE)
    assert not list(tmp_path.glob("*.unreadable*"))


def test_a_write_after_close_fails_at_once(tmp_path: Path) -> None:
    """A load still running when the server stops is refused, not left waiting."""
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.close()
    with pytest.raises(ShuttingDown):
        asyncio.run(index.put(row("a")))


def test_a_removal_committed_during_a_read_is_not_listed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The read's snapshot still holds the row, and the commit has already forgotten it was
    being removed (CI saw a deleted model listed after a reconcile)."""
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.put_many([row("a"), row("b")])
    index.remove("a")
    read = index._read

    def read_then_commit(query: str, parameters: Any = ()) -> sqlite3.Cursor:
        cursor = read(query, parameters)  # its snapshot begins at the first step
        index.put_many([])  # waits until the removal has committed
        return cursor

    monkeypatch.setattr(index, "_read", read_then_commit)
    assert index.names("", 10) == ["b"]
    assert [r.name for r in index.oldest_entries()] == ["b"]
    index.close()


def test_a_removal_committed_during_a_tenants_read_counts_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not before its commit and again after (CI saw a deleted entry still held by its tenant)."""
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.put_many([row("a")._replace(tenant="t1"), row("b")._replace(tenant="t2")])
    index.remove("a")
    read = index._read

    def read_then_commit(query: str, parameters: Any = ()) -> sqlite3.Cursor:
        cursor = read(query, parameters)
        index.put_many([])  # waits until the removal has committed
        return cursor

    monkeypatch.setattr(index, "_read", read_then_commit)
    assert index.held_by_tenant() == {"t2": KiB}
    assert index.tenant_bytes("t1") == 0
    index.close()


def test_a_file_read_in_place_reads_as_there_before_its_row_is_written(tmp_path: Path) -> None:
    """A model's description right after its load names its file, whatever the writer's lag."""
    path = tmp_path / INDEX_FILE
    index = DiskIndex(path)
    with held(path):
        index.put_later(row("a", entry=None))
        assert index.get("a") == row("a", entry=None)
        index.remove("a")
        assert index.get("a") is None
    assert eventually(lambda: index.rows == 0)
    assert index.get("a") is None
    index.close()
