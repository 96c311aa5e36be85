"""A cache the server cannot write (a read-only volume, lost permissions) is a 507 that says so,
without the cache's path and without a traceback; other models carry on."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest
from test_disk_tier import KiB, disk_tier

from modelhost.cache.stores.memory import MemoryStore
from modelhost.errors import InsufficientDisk


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES])
def test_unwritable_cache_is_507(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache that cannot be written is 507 without its path."""
    store = MemoryStore({"new.joblib": os.urandom(KiB), "old.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path / "cache", store)
    asyncio.run(tier.materialize("old.joblib", store.url_of("old.joblib")))

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise OSError(code, os.strerror(code), str(tmp_path / "cache"))

    monkeypatch.setattr(tier, "_publish", refused)
    with pytest.raises(InsufficientDisk, match="cannot be written") as error:
        asyncio.run(tier.materialize("new.joblib", store.url_of("new.joblib")))
    assert str(tmp_path) not in str(error.value)
    assert asyncio.run(tier.materialize("old.joblib", store.url_of("old.joblib"))).tier == "disk"


def test_unreadable_store_file_is_no_cache_fault(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store file the server cannot read is not called a cache fault."""
    store = MemoryStore({"new.joblib": os.urandom(KiB)})
    tier = disk_tier(tmp_path / "cache", store)

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "store/new.joblib"))

    monkeypatch.setattr(tier, "_publish", refused)
    with pytest.raises(PermissionError):
        asyncio.run(tier.materialize("new.joblib", store.url_of("new.joblib")))
