"""The runtimes the cache's models needed are imported by the next start's worker template, as
`--preload-runtimes` names them: a restart's first load of a cached model is not charged its
runtime's import, and a restored registered model's runtime is known the same way."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(1)
# what a worker has imported, reported by a handler that imports none of it
RUNTIMES_HANDLER = """
import json
import sys

RUNTIMES = ("sklearn", "xgboost", "lightgbm", "onnxruntime", "torch")


def handle(data, context):
    if data is None:
        return None
    return [[name for name in RUNTIMES if name in sys.modules] for _ in data]
"""


@pytest.fixture
def store(tmp_path: Path) -> Path:
    testing.iris_logreg(tmp_path / "store" / "iris.pkl")
    (tmp_path / "store" / "report").mkdir()
    (tmp_path / "store" / "report" / "handler.py").write_text(RUNTIMES_HANDLER)
    return tmp_path / "store"


def server_on(store: Path, work: Path, management_port: int) -> testing.RunningServer:
    """One worker whose template preloads onnxruntime alone, not scikit-learn."""
    args = testing.serve_args(
        store,
        work / "cache",
        workers=1,
        memory_budget="2GiB",
        preload_runtimes="onnxruntime",
        management_port=management_port,
    )
    return testing.RunningServer([*args, "--restore-registered"], work)


def imported(server: testing.RunningServer) -> list[str]:
    """The runtimes the worker holds before it loads anything but the reporting handler."""
    answered = httpx.post(f"{server.url}/predictions/report", json={}, timeout=60)
    assert answered.status_code == 200, answered.text
    return list(answered.json())


def test_a_restart_preloads_the_runtime_of_a_cached_model(store: Path, tmp_path: Path) -> None:
    """iris.pkl loaded once: the next start's worker has scikit-learn before its first load."""
    server = server_on(store, tmp_path, testing.free_port())
    with server:
        assert imported(server) == ["onnxruntime"]
        answered = httpx.post(f"{server.url}/models/iris.pkl/invoke", json=ROWS, timeout=60)
        assert answered.status_code == 200, answered.text
    with server:
        assert imported(server) == ["sklearn", "onnxruntime"]


def test_a_restored_models_runtime_is_preloaded(store: Path, tmp_path: Path) -> None:
    """A model registered through the management API, loaded once, then restored unloaded:
    the next start preloads its runtime, and the model answers."""
    management_port = testing.free_port()
    server = server_on(store, tmp_path, management_port)
    management = f"http://127.0.0.1:{management_port}/models"
    with server:
        params = {"url": "iris.pkl", "model_name": "kept", "initial_workers": "0"}
        assert httpx.post(management, params=params, timeout=60).status_code == 200
        answered = httpx.post(f"{server.url}/predictions/kept", json=ROWS, timeout=60)
        assert answered.status_code == 200, answered.text
    with server:
        assert imported(server) == ["sklearn", "onnxruntime"]
        answered = httpx.post(f"{server.url}/predictions/kept", json=ROWS, timeout=60)
        assert answered.status_code == 200, answered.text


def test_without_preload_runtimes_the_cache_chooses_them(store: Path, tmp_path: Path) -> None:
    """The default list is a guess for an empty cache: once the cache knows its models need
    scikit-learn alone, a restart's template imports it and none of the others."""
    args = testing.serve_args(store, tmp_path / "cache", workers=1, memory_budget="2GiB")
    server = testing.RunningServer(args, tmp_path)
    with server:
        assert imported(server) == ["sklearn", "xgboost", "lightgbm", "onnxruntime"]
        answered = httpx.post(f"{server.url}/models/iris.pkl/invoke", json=ROWS, timeout=60)
        assert answered.status_code == 200, answered.text
    with server:
        assert imported(server) == ["sklearn"]


def test_a_fresh_cache_guesses_from_the_stores_names(tmp_path: Path) -> None:
    """A store of pickles alone: the first start's template imports scikit-learn and none of
    the default's other runtimes, and the start log says so."""
    testing.iris_logreg(tmp_path / "store" / "iris.pkl")
    args = testing.serve_args(tmp_path / "store", tmp_path / "cache", workers=1)
    server = testing.RunningServer([*args, "--memory-budget", "2GiB"], tmp_path)
    with server:
        answered = httpx.post(f"{server.url}/models/iris.pkl/invoke", json=ROWS, timeout=60)
        assert answered.status_code == 200, answered.text
        assert "the worker template preloads sklearn\n" in server.log_text()
