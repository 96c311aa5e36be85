"""The disk tier against the in-memory store: a hard budget, entries that survive a restart, and
revalidation by ETag."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.disk import DiskTier, UnpackLimits
from modelhost.cache.download import DownloadPolicy
from modelhost.cache.stores import Stores
from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import InsufficientDisk, ModelNotFound, StoreUnavailable
from modelhost.records.events import EventLog
from modelhost.testing import StepClock

KiB = 1024
BUDGET = 64 * KiB


def disk_tier(
    cache_dir: Path,
    store: MemoryStore,
    budget: int = BUDGET,
    reconcile: bool = True,
    rebuild: bool = True,
) -> DiskTier:
    """A tier on `store`, rebuilt and reconciled (as a server's is a moment after start)."""
    tier = DiskTier(
        cache_dir,
        budget,
        stores=Stores(store),
        events=EventLog(),
        limits=UnpackLimits(max_bytes=2**30, max_files=100),
        policy=DownloadPolicy(attempts=1, timeout_s=5),
        revalidate_interval_s=10.0,
        clock=StepClock(),
    )
    if rebuild:
        tier.rebuild()
    if rebuild and reconcile:
        asyncio.run(tier.reconcile())
    return tier


def bytes_on_disk(folder: Path) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(folder) for f in fs)


def fetch(tier: DiskTier, store: MemoryStore, key: str) -> str:
    return asyncio.run(tier.materialize(key, store.url_of(key))).tier


@settings(max_examples=40, deadline=None)
@given(
    requests=st.lists(st.tuples(st.integers(0, 5), st.integers(1, 40)), min_size=1, max_size=12),
    busy=st.sets(st.integers(0, 5), max_size=2),
)
def test_the_budget_holds_and_busy_models_keep_their_artifacts(
    requests: list[tuple[int, int]], busy: set[int]
) -> None:
    store = MemoryStore()
    with tempfile.TemporaryDirectory() as cache:
        tier = disk_tier(Path(cache), store)

        def in_use(name: str) -> bool:
            return int(name[1]) in busy

        tier.attach(in_use=in_use)
        for index, kib in requests:
            key = f"m{index}.joblib"
            store.objects.setdefault(key, os.urandom(kib * KiB))
            held_before = {n for n in tier.names(limit=10) if in_use(n)}
            try:
                fetch(tier, store, key)
            except InsufficientDisk as error:
                assert "raise --disk-budget" in str(error)
            assert tier.used_bytes <= BUDGET
            assert bytes_on_disk(Path(cache) / "models") <= BUDGET
            assert held_before <= set(tier.names(limit=10))


def test_archive_keeps_only_unpacked_tree(tmp_path: Path) -> None:
    """An archive is unpacked and only the unpacked tree is kept."""
    content = bytes(48 * KiB)  # compresses to almost nothing: the peak is the unpacked tree
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w:gz") as tar:
        member = tarfile.TarInfo("model.joblib")
        member.size = len(content)
        tar.addfile(member, io.BytesIO(content))
    store = MemoryStore({"m.tar.gz": archive.getvalue(), "small.joblib": b"x" * KiB})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "small.joblib")
    fetch(tier, store, "m.tar.gz")
    artifact = tier.get("m.tar.gz")
    assert artifact is not None and (artifact.path / "model.joblib").read_bytes() == content
    assert not list(artifact.entry.glob("*.tar.gz"))  # type: ignore[union-attr]
    assert bytes_on_disk(tmp_path / "models") == tier.used_bytes <= BUDGET


def test_restart_takes_back_whole_entries_and_drops_the_rest(tmp_path: Path) -> None:
    store = MemoryStore({"a.joblib": b"a" * KiB, "b.joblib": b"b" * KiB})
    tier = disk_tier(tmp_path, store)
    assert fetch(tier, store, "a.joblib") == "remote"
    fetch(tier, store, "b.joblib")
    (tmp_path / "models/b.joblib/modelhost-entry.json").unlink()
    tier.index.remove("b.joblib")  # a folder whose record is missing: no row either
    tier.close()
    (tmp_path / "models/.tmp-half").mkdir()
    again = disk_tier(tmp_path, store)
    assert again.names(limit=10) == ["a.joblib"]
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["a.joblib"]
    assert fetch(again, store, "a.joblib") == "disk" and store.fetches == 2


def test_a_failed_download_leaves_no_trace(tmp_path: Path) -> None:
    store = MemoryStore({"a.joblib": b"a" * 32 * KiB})
    store.failures_left = 1
    tier = disk_tier(tmp_path, store)
    with pytest.raises(StoreUnavailable):
        fetch(tier, store, "a.joblib")
    assert list((tmp_path / "models").iterdir()) == [] and tier.used_bytes == 0


def test_revalidation_deletes_replaced_artifact(
    tmp_path: Path,
) -> None:
    """Revalidation deletes a replaced artifact and keeps one the store cannot check."""
    store = MemoryStore({"a.joblib": b"v1"})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "a.joblib")
    tier.clock.now += 100  # type: ignore[attr-defined]
    assert asyncio.run(tier.revalidation.check("a.joblib")) is False  # unchanged: checked, kept
    tier.clock.now += 100  # type: ignore[attr-defined]
    store.stall_s, store.objects["a.joblib"] = 0, b"v2"
    assert asyncio.run(tier.revalidation.check("a.joblib")) is True
    assert tier.get("a.joblib") is None and fetch(tier, store, "a.joblib") == "remote"
    tier.clock.now += 100  # type: ignore[attr-defined]
    del store.objects["a.joblib"]
    # gone from the store: keep serving
    assert asyncio.run(tier.revalidation.check("a.joblib")) is False


def test_made_up_name_is_not_interned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A made-up name leaves nothing in the intern table.

    pathlib interns every part of a path it parses, and the interpreter's intern table grows
    with them: the soak's late steps of ~1.8 MiB in the frontend were that table being resized
    under a scan of made-up names (found with tracemalloc). A name is looked up as a string and
    becomes a Path only once the store has it."""
    (tmp_path / "store").mkdir()
    stores = Stores(str(tmp_path / "store"))
    tier = DiskTier(
        tmp_path / "cache",
        BUDGET,
        stores=stores,
        events=EventLog(),
        limits=UnpackLimits(max_bytes=2**30, max_files=100),
        policy=DownloadPolicy(attempts=1, timeout_s=5),
    )
    tier.rebuild()
    asyncio.run(tier.reconcile())
    interned: list[str] = []
    intern = sys.intern
    monkeypatch.setattr(sys, "intern", lambda text: interned.append(text) or intern(text))
    name = "made-up-7f3a/never-seen-9c1e.joblib"
    with pytest.raises(ModelNotFound):
        asyncio.run(tier.materialize(name, stores.url_of(name)))
    assert [text for text in interned if "7f3a" in text or "9c1e" in text] == []


def test_a_tier_closed_while_it_reconciles_stops_quietly(tmp_path: Path) -> None:
    """A server that stops, or fails to bind its port, a moment after start: the background
    reconciliation ends with the index, not on it closed (a failure and a stray traceback)."""
    store = MemoryStore({"a.joblib": b"a" * KiB})
    tier = disk_tier(tmp_path, store)
    fetch(tier, store, "a.joblib")
    tier.close()
    again = disk_tier(tmp_path, store, rebuild=False)

    async def start_and_stop() -> list[object]:
        again.rebuild()  # starts the reconciliation on this loop
        again.close()
        others = asyncio.all_tasks() - {asyncio.current_task()}
        return list(await asyncio.gather(*others, return_exceptions=True))

    ended = asyncio.run(start_and_stop())
    assert not [error for error in ended if isinstance(error, Exception)]
    assert not [event for event in again.events.recent if event.kind == "failure"]
