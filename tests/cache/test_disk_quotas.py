"""Tenants' shares of the disk tier: past its maximum a tenant's own least recently used entries
go, an artifact larger than the maximum is refused, and the index says who holds what, across a
restart and from an index of the previous version."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from modelhost.cache.disk import DiskTier, UnpackLimits
from modelhost.cache.disk_index import INDEX_FILE
from modelhost.cache.download import DownloadPolicy
from modelhost.cache.quotas import NO_LIMITS, NoLimits, TenantLimits
from modelhost.cache.stores import Stores
from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import InsufficientDisk
from modelhost.records.events import EventLog
from modelhost.testing import StepClock

KiB = 1024
LIMITS = {"t1": NoLimits(disk_max_bytes=30 * KiB)}


def limits_of(tenant: str) -> TenantLimits:
    return LIMITS.get(tenant, NO_LIMITS)


def tier(cache_dir: Path, store: MemoryStore, events: EventLog | None = None) -> DiskTier:
    """64 KiB of disk; t1 may hold 30 KiB of it."""
    disk = DiskTier(
        cache_dir,
        64 * KiB,
        stores=Stores(store),
        events=events or EventLog(),
        limits=UnpackLimits(max_bytes=2**30, max_files=100),
        policy=DownloadPolicy(attempts=1, timeout_s=5),
        clock=StepClock(),
        tenant_limits=limits_of,
    )
    disk.rebuild()
    asyncio.run(disk.reconcile())
    return disk


def store_of(**sizes_kib: int) -> MemoryStore:
    return MemoryStore({f"{name}.joblib": b"x" * (kib * KiB) for name, kib in sizes_kib.items()})


def fetch(disk: DiskTier, store: MemoryStore, name: str, tenant: str) -> None:
    key = f"{name}.joblib"
    asyncio.run(disk.materialize(key, store.url_of(key), tenant))
    asyncio.run(disk.settled())


def held(disk: DiskTier) -> set[str]:
    return set(disk.names(limit=100))


def entry_bytes(disk: DiskTier, name: str) -> int:
    """Its file and its record."""
    artifact = disk.get(f"{name}.joblib")
    assert artifact is not None
    return artifact.bytes


def test_past_its_maximum_a_tenant_loses_its_own_oldest_entry(tmp_path: Path) -> None:
    store = store_of(a=12, b=12, c=12, o=20)
    disk = tier(tmp_path, store)
    fetch(disk, store, "o", "t2")  # older than t1's, and room is left in the budget
    fetch(disk, store, "a", "t1")
    fetch(disk, store, "b", "t1")
    fetch(disk, store, "c", "t1")
    assert held(disk) == {"o.joblib", "b.joblib", "c.joblib"}
    assert disk.tenant_bytes() == {
        "t1": entry_bytes(disk, "b") + entry_bytes(disk, "c"),
        "t2": entry_bytes(disk, "o"),
    }


def test_artifact_larger_than_its_tenants_maximum_is_refused_by_name(tmp_path: Path) -> None:
    store = store_of(big=40)
    disk = tier(tmp_path, store)
    with pytest.raises(InsufficientDisk, match=r"big.joblib of tenant t1 .* disk_max") as caught:
        fetch(disk, store, "big", "t1")
    assert "--tenants-file" in str(caught.value)
    assert held(disk) == set()
    assert store.fetches == 0  # refused on its announced size, before the download


def test_entries_its_loads_need_are_kept_and_the_new_one_refused(tmp_path: Path) -> None:
    store = store_of(a=12, b=12, c=12)
    disk = tier(tmp_path, store)
    disk.attach(in_use=lambda name: True)
    fetch(disk, store, "a", "t1")
    fetch(disk, store, "b", "t1")
    with pytest.raises(InsufficientDisk, match="tenant t1 .* being fetched or loaded"):
        fetch(disk, store, "c", "t1")
    assert held(disk) == {"a.joblib", "b.joblib"}


def test_deletions_for_a_quota_are_events_with_their_reason(tmp_path: Path) -> None:
    events = EventLog()
    store = store_of(a=20, b=20)
    disk = tier(tmp_path, store, events)
    fetch(disk, store, "a", "t1")
    fetch(disk, store, "b", "t1")
    deleted = [e for e in events.recent if e.kind == "delete"]
    assert [(e.model, e.reason, e.detail) for e in deleted] == [
        ("a.joblib", "tenant_disk_max", {"tenant": "t1"})
    ]


def test_tenants_holdings_survive_a_restart(tmp_path: Path) -> None:
    store = store_of(a=12, o=20)
    disk = tier(tmp_path, store)
    fetch(disk, store, "a", "t1")
    fetch(disk, store, "o", "t2")
    before = disk.tenant_bytes()
    disk.close()
    again = tier(tmp_path, store)
    assert again.tenant_bytes() == before
    again.delete("a.joblib", reason="test")
    assert again.tenant_bytes() == {"t2": before["t2"]}  # a queued removal counts at once


def test_an_index_of_the_previous_version_gains_the_tenant_column(tmp_path: Path) -> None:
    """Its entries are the server's own ("") until a tenant fetches them again."""
    store = store_of(a=12)
    disk = tier(tmp_path, store)
    fetch(disk, store, "a", "t1")
    a_bytes = entry_bytes(disk, "a")
    disk.close()
    with sqlite3.connect(tmp_path / INDEX_FILE) as old:  # as the previous version left it
        old.executescript(
            "DROP TABLE tenant_totals; DROP INDEX entries_by_tenant;"
            "DROP TRIGGER tenant_insert; DROP TRIGGER tenant_delete; DROP TRIGGER tenant_update;"
            "ALTER TABLE artifacts DROP COLUMN tenant;"
        )
    again = tier(tmp_path, store)
    assert again.tenant_bytes() == {"": a_bytes}
    assert held(again) == {"a.joblib"}
