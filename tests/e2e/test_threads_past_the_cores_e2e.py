"""`--threads-per-worker` far past the cores: the runtimes get the cores, the start log says so.
Before, a million threads crashed the worker at every LightGBM load, and so the model's two
tries cost two workers and every model they held."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e


def test_a_million_threads_a_worker_serve_on_the_cores(tmp_path: Path) -> None:
    testing.lightgbm_iris(tmp_path / "store" / "lgb" / "model.txt")
    testing.iris_logreg(tmp_path / "store" / "iris.joblib")
    args = testing.serve_args(
        tmp_path / "store", tmp_path / "cache", workers=1, threads_per_worker=1_000_000
    )
    with testing.RunningServer(args, tmp_path / "server") as server:
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for model in ("iris.joblib", "lgb"):
                answer = client.post(f"/models/{model}/invoke", json=testing.iris_rows(2))
                assert answer.status_code == 200, answer.text
        assert server.events("worker_exit") == []
        assert "threads_per_worker 1000000 is above the" in server.log_text()
