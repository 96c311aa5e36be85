"""Downloads: retried when a retry may mend, refused at once when silent, always verified."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from modelhost.cache.download import DownloadPolicy, download, verify
from modelhost.cache.stores import ObjectInfo
from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import ModelNotFound, StoreTimeout, StoreUnavailable

DATA = bytes(range(256)) * 4096  # 1 MiB, 16 chunks


class Pauses(list[float]):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def fetch(store: MemoryStore, dest: Path, policy: DownloadPolicy, pauses: Pauses):  # type: ignore[no-untyped-def]
    return asyncio.run(download(store, "m.joblib", dest, policy, sleep=pauses))


def test_a_reset_connection_is_retried_after_growing_pauses(tmp_path: Path) -> None:
    store, pauses = MemoryStore({"m.joblib": DATA}), Pauses()
    store.failures_left = 2
    done = fetch(store, tmp_path / "m", DownloadPolicy(attempts=3, backoff_s=1.0), pauses)
    assert done.attempts == 3 and done.bytes == len(DATA)
    assert (tmp_path / "m").read_bytes() == DATA
    assert 0.5 <= pauses[0] <= 1.0 and 1.0 <= pauses[1] <= 2.0


def test_last_try_fails_leaving_no_file(tmp_path: Path) -> None:
    """After the last try the error says so and no file is left."""
    store, pauses = MemoryStore({"m.joblib": DATA}), Pauses()
    store.failures_left = 5
    with pytest.raises(StoreUnavailable, match="gave up after 2 tries"):
        fetch(store, tmp_path / "m", DownloadPolicy(attempts=2), pauses)
    assert not (tmp_path / "m").exists() and store.fetches == 2


def test_a_missing_object_is_not_retried(tmp_path: Path) -> None:
    store = MemoryStore()
    with pytest.raises(ModelNotFound):
        fetch(store, tmp_path / "m", DownloadPolicy(attempts=3), Pauses())
    assert store.fetches == 0


def test_a_silent_store_times_out_without_a_retry(tmp_path: Path) -> None:
    store = MemoryStore({"m.joblib": DATA})
    store.stall_s = 30.0
    with pytest.raises(StoreTimeout, match="sent nothing for 0.2 s"):
        fetch(store, tmp_path / "m", DownloadPolicy(attempts=3, timeout_s=0.2), Pauses())
    assert store.fetches == 1


def test_the_announced_size_and_md5_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "m"
    path.write_bytes(DATA)
    assert verify(path, ObjectInfo(len(DATA)), "u") == len(DATA)
    with pytest.raises(StoreUnavailable, match="arrived with"):
        verify(path, ObjectInfo(len(DATA) + 1), "u")
    with pytest.raises(StoreUnavailable, match="MD5"):
        verify(path, ObjectInfo(len(DATA), "e", "0" * 32), "u")


def test_on_info_may_refuse_before_any_byte_is_fetched(tmp_path: Path) -> None:
    store = MemoryStore({"m.joblib": DATA})

    def refuse(info: ObjectInfo) -> None:
        raise RuntimeError(f"no room for {info.size}")

    with pytest.raises(RuntimeError, match=str(len(DATA))):
        asyncio.run(download(store, "m.joblib", tmp_path / "m", DownloadPolicy(), refuse))
    assert store.fetches == 0
