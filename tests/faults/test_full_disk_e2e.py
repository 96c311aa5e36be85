"""The cache's volume full, truly (a tmpfs of 6 MiB that another program filled): a model that
needs room there is 507 with what to do, a loaded one answers meanwhile, and once room is made
the first model loads with no restart."""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.stores import StaticHttpServer

from modelhost import testing
from modelhost.testing.archives import tar_gz_of

pytestmark = pytest.mark.e2e

VOLUME = "6m"
JSON = {"content-type": "application/json"}


@contextlib.contextmanager
def small_volume(folder: Path) -> Iterator[Path]:
    """`folder`, a tmpfs of VOLUME while the block runs; skipped where none may be mounted."""
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={VOLUME}", "tmpfs", str(folder)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode:
        pytest.skip(
            f"a full volume needs a tmpfs mounted, which this user may not: {mounted.stderr}"
        )
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def filled(folder: Path) -> Path:
    """A file that takes what room is left on `folder`'s volume."""
    filler = folder / "another-programs-file"
    with filler.open("wb") as file, contextlib.suppress(OSError):
        while True:
            file.write(bytes(1 << 16))
    return filler


def forest_archive(store: Path, work: Path) -> None:
    """forest.tar.gz, 3 MiB unpacked: it needs the cache's room even from a local store."""
    testing.random_forest(work / "forest" / "model.joblib", target_bytes=3 << 20)
    tar_gz_of(work / "forest", store / "forest.tar.gz")


def forest_file(store: Path, work: Path) -> None:
    """forest.joblib, 3 MiB: downloaded into the cache from an HTTP store."""
    testing.random_forest(store / "forest.joblib", target_bytes=3 << 20)


@pytest.fixture(params=[forest_archive, forest_file], ids=["unpacked", "downloaded"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """The store's URL and the forest's name in it; iris.joblib beside it."""
    store = tmp_path / "store"
    testing.iris_logreg(store / "iris.joblib")
    request.param(store, tmp_path)
    name = next(path.name for path in store.iterdir() if path.name.startswith("forest"))
    if request.param is forest_archive:
        yield str(store), name
        return
    with StaticHttpServer(store) as server:
        yield server.url, name


def test_a_full_cache_volume_is_507_and_a_freed_one_loads(
    store_url: tuple[str, str], tmp_path: Path
) -> None:
    url, forest = store_url
    with (
        small_volume(tmp_path / "cache") as cache,
        testing.RunningServer(testing.serve_args(url, cache, workers=1), tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        iris = json.dumps(testing.iris_rows(1))
        assert client.post("/models/iris.joblib/invoke", content=iris, headers=JSON).is_success
        filler = filled(cache)
        digits = json.dumps(testing.digits_rows(1))
        refused = client.post(f"/models/{forest}/invoke", content=digits, headers=JSON)
        assert (refused.status_code, refused.json()["type"]) == (507, "InsufficientDisk")
        assert "volume is full" in refused.json()["message"], refused.text
        assert "free space on it" in refused.json()["message"], refused.text
        again = client.post("/models/iris.joblib/invoke", content=iris, headers=JSON)
        assert again.json() == {"predictions": [0]}
        filler.unlink()
        loaded = client.post(f"/models/{forest}/invoke", content=digits, headers=JSON)
        assert loaded.status_code == 200, loaded.text
        assert "Traceback" not in server.log_text()
