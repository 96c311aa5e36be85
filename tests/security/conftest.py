"""A real server with one worker over a small store, for the hostile inputs that need one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost import testing


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "iris.pkl")
    testing.iris_logreg(root / "tenants/t000.joblib")
    testing.tar_gz_of(testing.mms_handler_folder(root / ".src/tar"), root / "archives/m.tar.gz")
    return root


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("cache")


@pytest.fixture(scope="module")
def server(
    store: Path, cache_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    args = testing.serve_args(store, cache_dir, workers=1, max_request_size="1MiB")
    with testing.RunningServer(args, tmp_path_factory.mktemp("server")) as running:
        yield running


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        yield http
