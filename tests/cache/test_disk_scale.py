"""The disk tier at scale: a miss, a new entry and making room cost the same at 1,000 and 100,000
entries, a restart reads no entry folder, and crash leftovers are reconciled in the background.

Cost is counted, never timed: SQLite calls a progress handler every few virtual-machine steps, so
a scan of the index shows up as steps in proportion to its rows."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_disk_tier import KiB, bytes_on_disk, disk_tier, fetch

from modelhost.cache import disk, entries
from modelhost.cache.disk import DiskTier
from modelhost.cache.disk_index import INDEX_FILE, DiskIndex, Row
from modelhost.cache.reconcile import Reconciliation
from modelhost.cache.stores.memory import MemoryStore

ROW_BYTES = KiB


def seed(cache_dir: Path, count: int) -> None:
    """An index of `count` entries of a KiB each, as a previous run left it (rows, no folders)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    index = DiskIndex(cache_dir / INDEX_FILE)
    rows = (
        Row(
            name=f"m{i:07d}.joblib",
            entry=f"m{i:07d}.joblib",
            path="model.joblib",
            bytes=ROW_BYTES,
            source="s3://b",
            etag=None,
            checked_at=0,
            last_used=i,
        )
        for i in range(count)
    )
    index.put_many(rows)
    index.close()


class Steps:
    """SQLite virtual-machine steps (in hundreds) run on the tier's index while counting."""

    def __init__(self, tier: DiskTier) -> None:
        self.count = 0
        tier.index.connection.set_progress_handler(self._tick, 100)

    def _tick(self) -> int:
        self.count += 1
        return 0  # go on


def seeded_tier(cache_dir: Path, count: int, store: MemoryStore, budget: int) -> DiskTier:
    seed(cache_dir, count)
    return disk_tier(cache_dir, store, budget, reconcile=False)


def steps_of(count: int, tmp: Path, act: Callable[[DiskTier, MemoryStore], Any], room: int) -> int:
    """The index steps `act` takes on a tier of `count` entries with `room` bytes to spare."""
    store = MemoryStore({"new.joblib": os.urandom(KiB)})
    tier = seeded_tier(tmp / str(count), count, store, count * ROW_BYTES + room)
    steps = Steps(tier)
    act(tier, store)
    tier.close()
    return steps.count


def a_miss(tier: DiskTier, store: MemoryStore) -> None:
    assert fetch(tier, store, "new.joblib") == "remote"


def written_before_the_index(cache: Path, store: MemoryStore) -> tuple[DiskTier, DiskTier]:
    """A tier that fetched every model of `store`, closed; and the tier a start finds after
    its index was lost, not yet reconciled."""
    tier = disk_tier(cache, store)
    for key in store.objects:
        fetch(tier, store, key)
    tier.close()
    for path in cache.glob(f"{INDEX_FILE}*"):
        path.unlink()
    return tier, disk_tier(cache, store, reconcile=False)


@pytest.mark.parametrize("room", [64 * KiB, 0], ids=["room to spare", "room to make"])
def test_new_entry_cost_is_flat(tmp_path: Path, room: int) -> None:
    """A new entry costs the same at any number of entries.

    A miss that downloads into a new entry, with room to spare or evicting the oldest entry
    to make it: the index steps at 100,000 entries stay within those at 1,000 (a scan of
    100,000 rows takes thousands more)."""
    small = steps_of(1_000, tmp_path, a_miss, room)
    large = steps_of(100_000, tmp_path, a_miss, room)
    assert large < small + 20


def test_making_room_takes_oldest_unused(tmp_path: Path) -> None:
    """Making room skips the entries in use and takes the oldest."""
    store = MemoryStore({"new.joblib": os.urandom(3 * KiB)})
    tier = seeded_tier(tmp_path, 1_000, store, 1_000 * ROW_BYTES)
    tier.attach(in_use=lambda name: name < "m0000002")  # the two oldest
    fetch(tier, store, "new.joblib")
    assert tier.names(limit=2) == ["m0000000.joblib", "m0000001.joblib"]
    assert tier.get("m0000002.joblib") is None and tier.get("m0000009.joblib") is not None
    assert tier.used_bytes <= tier.budget_bytes


def test_used_bytes_read_no_record(tmp_path: Path) -> None:
    """`used_bytes` and a fast copy offer read no record."""
    store = MemoryStore({"new.joblib": os.urandom(KiB)})
    tier = seeded_tier(tmp_path, 10_000, store, 20_000 * ROW_BYTES)
    fetch(tier, store, "new.joblib")
    artifact = tier.get("new.joblib")
    assert artifact is not None
    steps = Steps(tier)
    assert tier.used_bytes == 10_000 * ROW_BYTES + artifact.bytes
    assert tier.offer_fast_copy(artifact) is None  # its first load: no copy (doorkeeper)
    assert tier.offer_fast_copy(artifact) is not None
    assert steps.count == 0


@pytest.fixture
def entry_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every entry folder read, or tree walked, by the disk tier's modules."""
    calls: list[str] = []

    def counting(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        return lambda *args: calls.append(name) or real(*args)

    for module in (disk, entries):
        for name in ("read_entry", "tree_bytes"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, counting(name, getattr(module, name)))
    yield calls


def test_a_restart_with_100000_entries_reads_no_entry_folder(
    tmp_path: Path, entry_reads: list[str]
) -> None:
    """Start-up opens the index: its running totals come with it, and it lists by name at once."""
    seed(tmp_path / "large", 100_000)
    seed(tmp_path / "small", 1_000)
    started = {}
    for size in ("small", "large"):
        tier = disk_tier(tmp_path / size, MemoryStore(), 2**40, reconcile=False, rebuild=False)
        steps = Steps(tier)
        tier.rebuild()
        started[size] = steps.count
        tier.close()
    assert entry_reads == []
    assert started["large"] < started["small"] + 20
    tier = disk_tier(tmp_path / "large", MemoryStore(), 2**40, reconcile=False)
    assert tier.count() == 100_000 and tier.used_bytes == 100_000 * ROW_BYTES
    assert tier.names(after="m0000041.joblib", limit=2) == ["m0000042.joblib", "m0000043.joblib"]
    assert tier.get("m0099999.joblib") is not None


def test_crash_leftovers_are_reconciled(
    tmp_path: Path,
) -> None:
    """Crash leftovers are reconciled and the budget counts them meanwhile.

    A temporary folder, an entry renamed into place whose row was never written, a row whose
    folder is gone and a folder with no record: after reconciling, the index and the folders
    agree, and before it the tier counts at least what the folders hold."""
    names = ("a.joblib", "b.joblib", "c.joblib")
    store = MemoryStore({name: os.urandom(4 * KiB) for name in names})
    tier = disk_tier(tmp_path, store)
    for name in names:
        fetch(tier, store, name)
    models = tmp_path / "models"
    tier.index.remove("b.joblib")  # renamed into place, then the crash
    shutil.rmtree(models / "c.joblib")  # deleted by hand
    (models / ".tmp-half").mkdir()
    (models / ".tmp-half/part").write_bytes(b"x" * KiB)
    (models / "broken").mkdir()
    (models / "broken/model.joblib").write_bytes(b"y" * KiB)
    tier.close()
    again = disk_tier(tmp_path, store, reconcile=False)
    assert again.used_bytes >= bytes_on_disk(models)
    asyncio.run(again.reconcile())
    assert again.names(limit=10) == ["a.joblib", "b.joblib"]
    assert sorted(p.name for p in models.iterdir()) == ["a.joblib", "b.joblib"]
    assert again.used_bytes == bytes_on_disk(models)
    assert fetch(again, store, "b.joblib") == "disk" and store.fetches == 3


def test_unindexed_cache_is_taken_back(tmp_path: Path) -> None:
    """A cache without an index is taken back in the background.

    A cache written by the version before the index: nothing read before the tier serves, a
    model asked for meanwhile is taken from its folder, and every whole entry is known once
    reconciled."""
    store = MemoryStore({f"m{i}.joblib": os.urandom(2 * KiB) for i in range(5)})
    tier, again = written_before_the_index(tmp_path, store)
    assert again.count() == 0 and again.used_bytes >= bytes_on_disk(tmp_path / "models")
    assert fetch(again, store, "m3.joblib") == "disk"  # its folder read ahead of the scan
    assert again.count() == 1 and store.fetches == 5
    asyncio.run(again.reconcile())
    assert again.count() == 5 and again.used_bytes == bytes_on_disk(tmp_path / "models")
    assert fetch(again, store, "m1.joblib") == "disk" and store.fetches == 5


def test_deleted_entry_frees_its_name_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deleted entry frees its name at once and is removed off the loop."""
    store = MemoryStore({"a.joblib": os.urandom(4 * KiB)})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "a.joblib")
    removed_in: list[bool] = []
    rmtree = shutil.rmtree

    def recording(path: Any, *args: Any, **kwargs: Any) -> None:
        removed_in.append(asyncio_loop_running())
        rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", recording)

    async def delete_then_look() -> None:
        tier.delete("a.joblib", reason="stale")
        assert not (tmp_path / "models/a.joblib").exists() and tier.get("a.joblib") is None
        assert tier.used_bytes > 0  # still on disk until the thread is done
        await tier.settled()

    asyncio.run(delete_then_look())
    assert removed_in == [False] and tier.used_bytes == 0
    assert bytes_on_disk(tmp_path / "models") == 0


def asyncio_loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def test_a_reconciliation_cut_short_runs_again_to_the_end(tmp_path: Path) -> None:
    """The server stops while the scan reads the folders; the next start scans them again."""
    store = MemoryStore({f"m{i}.joblib": os.urandom(KiB) for i in range(5)})
    tier, again = written_before_the_index(tmp_path, store)

    async def cut_short() -> None:
        waiting = asyncio.ensure_future(again.reconcile())
        await asyncio.sleep(0)
        waiting.cancel()  # and asyncio.run cancels the reconciliation on its way out

    asyncio.run(cut_short())
    assert not again.reconciliation.done
    asyncio.run(again.reconcile())
    assert again.count() == 5 and again.used_bytes == bytes_on_disk(tmp_path / "models")


@settings(max_examples=25, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    lost_rows=st.sets(st.integers(0, 5)),
    lost_folders=st.sets(st.integers(0, 5)),
    leftovers=st.lists(st.integers(1, 8), max_size=3),
    lost_index=st.booleans(),
)
def test_tier_counts_all_on_disk(
    sizes: list[int],
    lost_rows: set[int],
    lost_folders: set[int],
    leftovers: list[int],
    lost_index: bool,
) -> None:
    """Before and after reconciling, the tier counts all that is on disk.

    Whatever a crash left (rows without folders, folders without rows, half-built folders,
    no index at all), the tier never counts less than the cache holds, and once reconciled
    it counts exactly that."""
    store = MemoryStore({f"m{i}.joblib": os.urandom(kib * KiB) for i, kib in enumerate(sizes)})
    with tempfile.TemporaryDirectory() as scratch:
        cache = Path(scratch)
        tier = disk_tier(cache, store)
        for i in range(len(sizes)):
            fetch(tier, store, f"m{i}.joblib")
        for i in lost_rows & set(range(len(sizes))):
            tier.index.remove(f"m{i}.joblib")
        for i in lost_folders & set(range(len(sizes))):
            shutil.rmtree(cache / "models" / f"m{i}.joblib", ignore_errors=True)
        for n, kib in enumerate(leftovers):  # builds under way: within the budget's room
            if bytes_on_disk(cache / "models") + kib * KiB > tier.budget_bytes:
                break
            (cache / f"models/.tmp-crashed-{n}").mkdir()
            (cache / f"models/.tmp-crashed-{n}/part").write_bytes(b"x" * kib * KiB)
        tier.close()
        if lost_index:
            for path in cache.glob(f"{INDEX_FILE}*"):
                path.unlink()
        again = disk_tier(cache, store, reconcile=False)
        assert again.used_bytes >= bytes_on_disk(cache / "models")
        asyncio.run(again.reconcile())
        whole = sorted(p.name for p in (cache / "models").iterdir())
        assert again.names(limit=10) == whole
        assert again.used_bytes == bytes_on_disk(cache / "models") <= again.budget_bytes
        again.close()


def test_new_entry_waits_for_folder_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new entry waits for the folders to be counted, not for the rows.

    After a restart, building an entry waits until every folder on disk is counted (the
    scan of folders), not for the check of every row's folder that follows."""
    store = MemoryStore({"a.joblib": os.urandom(KiB), "new.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "a.joblib")
    tier.close()
    again = disk_tier(tmp_path, store, reconcile=False)
    pages: list[object] = []

    async def stalled(self: Reconciliation, page: object) -> None:
        pages.append(page)
        await asyncio.Event().wait()  # the check of rows never ends

    monkeypatch.setattr(Reconciliation, "_rows", stalled)

    async def miss() -> str:
        url = store.url_of("new.joblib")
        return (await asyncio.wait_for(again.materialize("new.joblib", url), 30)).tier

    assert asyncio.run(miss()) == "remote"
    assert pages and not again.reconciliation.done


def test_unreadable_index_is_set_aside(
    tmp_path: Path,
) -> None:
    """An index SQLite cannot read is set aside and the folders taken back."""
    store = MemoryStore({"a.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "a.joblib")
    tier.close()
    for path in tmp_path.glob(f"{INDEX_FILE}*"):
        path.unlink()
    (tmp_path / INDEX_FILE).write_bytes(b"not a database, a disk that lost its sectors" * 100)
    again = disk_tier(tmp_path, store)
    assert again.names(limit=10) == ["a.joblib"] and fetch(again, store, "a.joblib") == "disk"
    assert (tmp_path / f"{INDEX_FILE}.unreadable").exists()


def test_checking_every_rows_folder_interns_no_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pathlib interns the parts of every path it parses, and the intern table never shrinks:
    the check of 100,000 rows' folders would leave it that large. Their paths stay text."""
    seed(tmp_path, 300)
    tier = disk_tier(tmp_path, MemoryStore(), reconcile=False)
    interned: list[str] = []
    intern = sys.intern
    monkeypatch.setattr(sys, "intern", lambda text: interned.append(text) or intern(text))
    asyncio.run(tier.reconcile())
    assert tier.count() == 0  # none of the rows had its folder
    assert [text for text in interned if text.startswith("m00")] == []


def test_taking_back_folders_without_rows_interns_no_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same for a cache written before the index: its folders are read as text."""
    store = MemoryStore({f"m00{i}.joblib": os.urandom(KiB) for i in range(3)})
    tier, again = written_before_the_index(tmp_path, store)
    interned: list[str] = []
    intern = sys.intern
    monkeypatch.setattr(sys, "intern", lambda text: interned.append(text) or intern(text))
    asyncio.run(again.reconcile())
    assert again.count() == 3
    assert [text for text in interned if text.startswith("m00")] == []
