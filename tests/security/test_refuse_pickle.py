"""--refuse-pickle: artifacts that unpickle on load (joblib, pickle) are refused before a worker
sees them, whether a file, a folder or inside an archive; other formats still load."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import httpx
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
        stores=Stores(str(store)),
        events=EventLog(),
        limits=UnpackLimits(1 << 30, 1000),
        policy=DownloadPolicy(),
        why_untrusted=lambda name: "--refuse-pickle" if refuse_pickle else "",
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


class Planted:
    """Unpickled, it makes the folder `marker`: what a hostile pickle could do, harmlessly."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        import os

        return os.mkdir, (str(self.marker),)


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    """Pickles no file name gives away: one a manifest names `weights.bin`, one reached through
    a folder's only subfolder, a link to a folder elsewhere."""
    root = tmp_path / "store"
    named = root / "named"
    named.mkdir(parents=True)
    (named / "modelhost.toml").write_text('handler = "sklearn"\nmodel_file = "weights.bin"\n')
    (named / "weights.bin").write_bytes(pickle.dumps(Planted(tmp_path / "ran-named")))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "model.joblib").write_bytes(pickle.dumps(Planted(tmp_path / "ran-linked")))
    (root / "linked").mkdir()
    (root / "linked/inner").symlink_to(elsewhere, target_is_directory=True)
    return root


@pytest.mark.e2e
@pytest.mark.parametrize("name", ["named", "linked"])
def test_a_pickle_no_name_gives_away_is_never_unpickled(
    name: str, hostile_store: Path, tmp_path: Path
) -> None:
    args = [*testing.serve_args(hostile_store, tmp_path / "cache", workers=1), "--refuse-pickle"]
    with testing.RunningServer(args, tmp_path / "server") as server:
        response = httpx.post(f"{server.url}/models/{name}/invoke", json=[[1, 2, 3, 4]])
        iris = httpx.get(f"{server.url}/ping")
    assert not (tmp_path / f"ran-{name}").exists()  # the pickle's code never ran
    assert response.status_code == 500, response.text
    assert response.json()["type"] == "UnsafeArtifact"
    assert "--refuse-pickle" in response.json()["message"]
    assert iris.status_code == 200
