"""The disk tier: unpacked archives stay within the disk budget and survive a restart."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ARCHIVES = 5
ROW = testing.iris_rows(1)[0]
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def archive_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("archives")
    source = testing.mms_handler_folder(root / ".src/model")
    for index in range(ARCHIVES):
        testing.tar_gz_of(source, root / f"a{index}.tar.gz")
    (root / ".src/big").mkdir()
    testing.tar_gz_of(
        testing.random_forest(root / ".src/big", 2 * 2**20).parent, root / "big.tar.gz"
    )
    return root


def unpacked_bytes(cache_dir: Path) -> int:
    return sum(p.stat().st_size for p in (cache_dir / "models").rglob("*") if p.is_file())


def one_archive_bytes(archive_store: Path) -> int:
    return sum(p.stat().st_size for p in (archive_store / ".src/model").rglob("*") if p.is_file())


def args(store: Path, cache_dir: Path, disk_budget: int) -> list[str]:
    return testing.serve_args(store, cache_dir, workers=1, disk_budget=disk_budget)


def test_cycling_archives_keeps_the_disk_budget(archive_store: Path, tmp_path: Path) -> None:
    """Cycling archives keeps the disk budget and restart keeps the tier."""
    cache_dir = tmp_path / "cache"
    budget = int(one_archive_bytes(archive_store) * 2.5)  # room for two unpacked archives
    with testing.RunningServer(args(archive_store, cache_dir, budget), tmp_path) as server:
        for index in range(ARCHIVES):
            name = f"a{index}.tar.gz"
            response = httpx.post(f"{server.url}/models/{name}/invoke", json=[ROW])
            assert response.status_code == 200, response.text
            assert httpx.delete(f"{server.url}/models/{name}").status_code == 200
            assert unpacked_bytes(cache_dir) <= budget
        log = server.log_text()
    deletions = [json.loads(line) for line in log.splitlines() if '"kind":"delete"' in line]
    assert [d["reason"] for d in deletions] == ["disk_budget"] * (ARCHIVES - 2)
    kept = {p.name for p in (cache_dir / "models").iterdir()}
    assert len(kept) == 2

    with testing.RunningServer(args(archive_store, cache_dir, budget), tmp_path) as server:
        last = f"a{ARCHIVES - 1}.tar.gz"
        response = httpx.post(f"{server.url}/models/{last}/invoke", json=[ROW])
        assert response.status_code == 200
        listed = {m["modelName"] for m in httpx.get(f"{server.url}/models").json()["models"]}
        log = server.log_text()
    assert last in listed
    assert '"kind":"unpack"' not in log  # the unpacked copy from the first run was reused


def test_an_archive_larger_than_the_disk_budget_is_507(archive_store: Path, tmp_path: Path) -> None:
    budget = one_archive_bytes(archive_store) * 3
    with testing.RunningServer(args(archive_store, tmp_path / "c", budget), tmp_path) as server:
        response = httpx.post(f"{server.url}/models/big.tar.gz/invoke", json=[ROW])
        assert response.status_code == 507, response.text
        assert "disk budget" in response.json()["message"]
        assert httpx.post(f"{server.url}/models/a0.tar.gz/invoke", json=[ROW]).status_code == 200
    assert unpacked_bytes(tmp_path / "c") <= budget


@pytest.fixture(scope="module")
def forest_archives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six archived forests (built-in handler: nothing reads the files once loaded)."""
    root = tmp_path_factory.mktemp("forest-archives")
    for seed in range(6):
        folder = root / f".src/f{seed}"
        testing.random_forest(folder / "model.joblib", 2**20, seed=seed)
        testing.tar_gz_of(folder, root / f"f{seed}.tar.gz")
    return root


def test_a_disk_smaller_than_memory_serves_every_model(
    forest_archives: Path, tmp_path: Path
) -> None:
    """Room on disk for two unpacked forests, in memory for all six: the loaded ones do not need
    their files, so each new model makes room on disk and all six stay loaded (no 507)."""
    cache_dir = tmp_path / "cache"
    one = max(p.stat().st_size for p in forest_archives.glob(".src/*/model.joblib"))
    budget = int(one * 2.5)
    serve = [*args(forest_archives, cache_dir, budget), "--memory-budget", "4GiB"]
    rows = testing.digits_rows(2)
    with testing.RunningServer(serve, tmp_path) as server:
        for round_ in ("cold", "warm"):
            for seed in range(6):
                response = httpx.post(f"{server.url}/models/f{seed}.tar.gz/invoke", json=rows)
                assert response.status_code == 200, f"{round_} f{seed}: {response.text}"
                if round_ == "warm":
                    assert response.headers["x-modelhost-cache"] == "hit"
                assert unpacked_bytes(cache_dir) <= budget
        stats = httpx.get(f"{server.url}/stats").json()
    assert stats["memory"]["loadedModels"] == 6
    assert stats["disk"]["usedBytes"] <= budget
