"""--refuse-pickle: artifacts that unpickle on load (joblib, pickle) are refused before a worker
sees them, whether a file, a folder or inside an archive; other formats still load."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.cache.disk import DiskTier, UnpackLimits
from modelhost.cache.download import DownloadPolicy
from modelhost.cache.stores import Stores
from modelhost.errors import UnsafeArtifact
from modelhost.records.events import EventLog


def tier(store: Path, cache: Path, refuse_pickle: bool) -> DiskTier:
    return DiskTier(
        cache,
        1 << 30,
        Stores(str(store)),
        EventLog(),
        UnpackLimits(1 << 30, 1000),
        DownloadPolicy(),
        refuse_pickle=refuse_pickle,
    )


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    testing.iris_logreg(root / "m.joblib")
    testing.mms_handler_folder(root / "folder")  # model.joblib beside handler.py
    testing.tar_gz_of(testing.mms_handler_folder(tmp_path / "src"), root / "a.tar.gz")
    (root / "plain").mkdir()
    (root / "plain/model.onnx").write_bytes(b"not really onnx")
    return root


@pytest.mark.parametrize("name", ["m.joblib", "folder", "a.tar.gz"])
def test_pickle_based_artifacts_are_refused_when_asked(
    name: str, store: Path, tmp_path: Path
) -> None:
    disk = tier(store, tmp_path / "cache", refuse_pickle=True)
    with pytest.raises(UnsafeArtifact, match="--refuse-pickle"):
        asyncio.run(disk.materialize(name, disk.stores.url_of(name)))
    allowed = tier(store, tmp_path / "cache2", refuse_pickle=False)
    assert asyncio.run(allowed.materialize(name, allowed.stores.url_of(name))).artifact.bytes > 0


def test_other_formats_load_when_pickle_is_refused(store: Path, tmp_path: Path) -> None:
    disk = tier(store, tmp_path / "cache", refuse_pickle=True)
    assert asyncio.run(disk.materialize("plain", disk.stores.url_of("plain"))).artifact.bytes > 0
