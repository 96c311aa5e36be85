"""A real server on loopback for the toolkit's end-to-end tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.serving import Servers
from helpers.toolkit import MODELS, SLOW

from modelhost import testing


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("toolkit-store")
    for name in MODELS:
        testing.iris_logreg(root / name)
    testing.slow_handler_folder(root / SLOW, sleep_s_param=False, fixed_sleep_s=0.05)
    return root


@pytest.fixture(scope="module")
def access_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The JSON-lines access log the module's server writes."""
    return tmp_path_factory.mktemp("access") / "access.jsonl"


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers, access_log: Path) -> testing.RunningServer:
    return serve(store, workers=1, memory_budget="2GiB", access_log=access_log)
