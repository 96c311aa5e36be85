"""Fast copies, the tier's side: offered from a name's second load on, only into free room, read
once written, never across a new version of the artifact, counted against the disk budget and the
first bytes deleted."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest
from test_disk_tier import KiB, disk_tier, fetch

from modelhost.cache.disk import Artifact, DiskTier
from modelhost.cache.fast_copies import Offer, room_for
from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import InsufficientDisk

BUDGET = 64 * KiB


def written(tier: DiskTier, offer: Offer | None, size: int) -> None:
    """What a worker does with room: write `size` bytes; then the host settles the offer."""
    assert offer is not None and not offer.reads
    offer.path.write_bytes(b"p" * size)
    tier.fast_copies.settle(offer, size, read=False)


def offered(tier: DiskTier, artifact: Artifact) -> Offer | None:
    """The offer of a load after the name's first (which is offered nothing)."""
    tier.offer_fast_copy(artifact)
    return tier.offer_fast_copy(artifact)


def known(tier: DiskTier, name: str) -> Artifact:
    artifact = tier.get(name)
    assert artifact is not None
    return artifact


def local_artifact(tmp_path: Path, name: str, size: int) -> Artifact:
    path = tmp_path / "store" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(os.urandom(size))
    return Artifact(name, path, size, source=f"file:///{name}")


def test_second_load_writes_a_copy(tmp_path: Path) -> None:
    """A name loaded once gets no copy and its second load writes one.

    A scan of one-off loads writes nothing to disk: copies pay off on reloads."""
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    once = [local_artifact(tmp_path, f"once{i}.joblib", 4 * KiB) for i in range(3)]
    assert [tier.offer_fast_copy(artifact) for artifact in once] == [None] * 3
    assert tier.used_bytes == 0
    again = tier.offer_fast_copy(once[1])
    assert again is not None and again.room == room_for(4 * KiB)


def test_a_copy_is_offered_into_free_room_then_read(tmp_path: Path) -> None:
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    artifact = local_artifact(tmp_path, "m.joblib", 4 * KiB)
    offer = offered(tier, artifact)
    assert offer is not None and offer.room == room_for(4 * KiB)
    assert tier.used_bytes == offer.room  # promised while the worker writes
    assert tier.offer_fast_copy(artifact) is None  # one writer at a time
    written(tier, offer, 4 * KiB)
    assert tier.used_bytes == 4 * KiB
    again = tier.offer_fast_copy(artifact)
    assert again is not None and again.reads and again.path == offer.path


def test_no_copy_without_room_or_pickle(tmp_path: Path) -> None:
    """No copy without free room or for a file that is no pickle."""
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    assert offered(tier, local_artifact(tmp_path, "big.joblib", BUDGET)) is None
    assert offered(tier, local_artifact(tmp_path, "m.onnx", KiB)) is None
    assert tier.used_bytes == 0


def test_rewritten_artifact_skips_old_copy(tmp_path: Path) -> None:
    """An artifact rewritten in place never meets its old copy."""
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    artifact = local_artifact(tmp_path, "m.joblib", 4 * KiB)
    first = offered(tier, artifact)
    written(tier, first, 4 * KiB)
    artifact.path.write_bytes(os.urandom(5 * KiB))  # a new version, same name
    second = tier.offer_fast_copy(artifact)
    assert first is not None and second is not None
    assert not second.reads and second.path != first.path
    assert not first.path.exists()  # the old version's copy is gone, and its bytes


def test_a_copy_that_could_not_be_read_is_forgotten(tmp_path: Path) -> None:
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    artifact = local_artifact(tmp_path, "m.joblib", 4 * KiB)
    written(tier, offered(tier, artifact), 4 * KiB)
    offer = tier.offer_fast_copy(artifact)
    assert offer is not None and offer.reads
    tier.fast_copies.settle(offer, 0, read=False)  # torn: the worker loaded the artifact
    assert tier.used_bytes == 0 and not offer.path.exists()
    assert not tier.offer_fast_copy(artifact).reads  # type: ignore[union-attr]


def test_copies_go_before_entries(tmp_path: Path) -> None:
    """Copies are deleted before any entry when the disk needs room."""
    store = MemoryStore({f"m{i}.joblib": os.urandom(14 * KiB) for i in range(4)})
    tier = disk_tier(tmp_path / "cache", store)
    for index in range(2):
        fetch(tier, store, f"m{index}.joblib")
        written(tier, offered(tier, known(tier, f"m{index}.joblib")), 14 * KiB)
    entries = sum(known(tier, name).bytes for name in tier.names(limit=10))
    assert tier.used_bytes == entries + 28 * KiB
    fetch(tier, store, "m2.joblib")  # needs room: a copy goes, no entry
    assert tier.names(limit=10) == ["m0.joblib", "m1.joblib", "m2.joblib"]
    assert set(tier.fast_copies.copies) == {"m1.joblib"}  # the least recently used went
    assert tier.used_bytes <= BUDGET


def test_delete_and_restart_drop_copies(
    tmp_path: Path,
) -> None:
    """Deleting a model deletes its copy and a restart starts without copies."""
    store = MemoryStore({"a.joblib": os.urandom(KiB), "b.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path / "cache", store)
    for name in ("a.joblib", "b.joblib"):
        fetch(tier, store, name)
        written(tier, offered(tier, known(tier, name)), KiB)
    tier.delete("a.joblib", reason="stale")
    assert set(tier.fast_copies.copies) == {"b.joblib"}
    restarted = disk_tier(tmp_path / "cache", store)  # other library versions, maybe
    assert not any(restarted.fast_copies.folder.iterdir())
    assert restarted.used_bytes == sum(known(restarted, n).bytes for n in restarted.names(limit=9))
    assert asyncio.run(restarted.materialize("b.joblib", store.url_of("b.joblib"))).tier == "disk"


def test_copy_of_dead_writer_leaves_no_file(tmp_path: Path) -> None:
    """A copy whose worker died writing it leaves no file."""
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    offer = offered(tier, local_artifact(tmp_path, "m.joblib", 4 * KiB))
    assert offer is not None
    torn = offer.path.with_name(f".{offer.path.name}.4242")  # as workers/fast_copy.py writes
    torn.write_bytes(b"p" * KiB)
    tier.fast_copies.settle(offer, 0, read=False)  # the load failed: the worker died
    assert not any(tier.fast_copies.folder.iterdir())
    assert tier.used_bytes == 0


def test_the_copy_read_least_recently_goes_first(tmp_path: Path) -> None:
    """Copies leave in the order of their last read, kept as they are read (no sort)."""
    tier = disk_tier(tmp_path / "cache", MemoryStore())
    first, second = (local_artifact(tmp_path, name, 4 * KiB) for name in ("a.joblib", "b.joblib"))
    for artifact in (first, second):
        written(tier, offered(tier, artifact), 4 * KiB)
    assert tier.offer_fast_copy(first).reads  # type: ignore[union-attr]
    assert tier.fast_copies.oldest() == "b.joblib"
    assert tier.fast_copies.written_bytes == 8 * KiB == tier.used_bytes


def test_full_disk_drops_copies_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk takes the fast copies first and the entry is written.

    The volume fills before the budget does (something else wrote to it): copies are
    expendable, so they go and the entry is written again, instead of a 507."""
    store = MemoryStore({"old.joblib": os.urandom(KiB), "new.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path / "cache", store)
    fetch(tier, store, "old.joblib")
    written(tier, offered(tier, known(tier, "old.joblib")), KiB)
    publish, full = tier._publish, [True]

    def full_once(*args: Any, **kwargs: Any) -> Any:
        if full.pop() if full else False:
            raise OSError(errno.ENOSPC, "No space left on device")
        return publish(*args, **kwargs)

    monkeypatch.setattr(tier, "_publish", full_once)
    assert fetch(tier, store, "new.joblib") == "remote"
    assert not tier.fast_copies.copies and not any(tier.fast_copies.folder.iterdir())
    assert tier.get("new.joblib") is not None


def test_full_disk_without_copies_is_507(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk without copies to drop is 507 without paths."""
    store = MemoryStore({"new.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path / "cache", store)

    def full(*args: Any, **kwargs: Any) -> Any:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tier, "_publish", full)
    with pytest.raises(InsufficientDisk) as refused:
        fetch(tier, store, "new.joblib")
    assert str(tmp_path) not in str(refused.value)  # where the cache is stays on the server
