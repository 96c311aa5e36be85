"""Large request bodies and handlers that keep memory must not lock out cold loads: the memory
goes back to the models' budget.

Eight concurrent one-row JSON bodies of 6 MiB (one very wide row: the row cap does not apply)
left the workers holding hundreds of MiB of freed heap, counted in the server's PSS and so in
the memory the idle server uses; every cold load then answered 507 and nothing could be evicted.
A handler that leaves memory in a library's global after it is unloaded did the same: only a
fresh worker gives that back.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from modelhost import testing
from modelhost.records.memory import pss_bytes

pytestmark = pytest.mark.e2e

BUDGET_BYTES = 512 * 2**20
BODIES = 8
BODY_BYTES = 6 * 2**20 - 1024  # under the default --max-request-size
FORESTS = 2
SETTLE_S = 3.0  # the memory watch reads every second
PATIENCE_S = 30.0
KEPT_PER_REQUEST_MIB = 40
KEEPER_REQUESTS = 8

KEEPER = f'''"""Keeps {KEPT_PER_REQUEST_MIB} MiB of each request in a global, as a cache might."""

import sys


def handle(data, context):
    if data is None:
        return None
    kept = sys.__dict__.setdefault("_modelhost_test_kept", [])
    kept.append(b"k" * ({KEPT_PER_REQUEST_MIB} << 20))
    return [{{"kept": len(kept)}} for _ in data]
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "iris.joblib")
    (root / "keeper").mkdir()
    (root / "keeper" / "handler.py").write_text(KEEPER)
    for seed in range(FORESTS):
        testing.random_forest(root / f"forest{seed}.joblib", 40 * 2**20, seed=seed)
    return root


def wide_row(total_bytes: int) -> bytes:
    """One row of as many numbers as fill `total_bytes` of JSON."""
    number = "0.123456,"
    return ("[[" + number * (total_bytes // len(number) - 1) + "0]]").encode()


def server_pss_bytes(pid: int) -> int:
    """The PSS of the server's whole process tree."""
    root = psutil.Process(pid)
    return sum(pss_bytes(process.pid) for process in [root, *root.children(recursive=True)])


def send_together(url: str, body: bytes, count: int) -> list[int]:
    """POST `body` to `url` from `count` threads at once; their statuses."""
    statuses: list[int] = []

    def post() -> None:
        headers = {"content-type": "application/json"}
        statuses.append(httpx.post(url, content=body, headers=headers, timeout=300).status_code)

    threads = [threading.Thread(target=post) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def cold_load(client: httpx.Client, url: str, seed: int) -> httpx.Response:
    return client.post(
        f"{url}/models/forest{seed}.joblib/invoke",
        content=json.dumps(testing.digits_rows(1)),
        headers={"content-type": "application/json"},
    )


def test_cold_loads_are_served_after_large_bodies(store: Path, tmp_path: Path) -> None:
    args = testing.serve_args(store, tmp_path / "cache", workers=2, memory_budget="512MiB")
    with testing.RunningServer(args, tmp_path) as server, httpx.Client(timeout=300) as client:
        invoke = f"{server.url}/models/iris.joblib/invoke"
        assert client.post(invoke, json=testing.iris_rows(1)).status_code == 200
        statuses = send_together(invoke, wide_row(BODY_BYTES), BODIES)
        assert statuses == [400] * BODIES  # parsed, then refused: iris takes 4 features
        time.sleep(SETTLE_S)
        for seed in range(FORESTS):
            cold = cold_load(client, server.url, seed)
            assert cold.status_code == 200, cold.text
        assert server_pss_bytes(server.pid) <= BUDGET_BYTES


def test_cold_loads_are_served_after_a_handler_kept_memory(store: Path, tmp_path: Path) -> None:
    """The keeper leaves 320 MiB behind in its worker once unloaded; the worker is recycled.
    Without the growth limit, which would replace it sooner (test_growing_models_e2e.py)."""
    settings = {"workers": 1, "memory_budget": "512MiB", "worker_max_growth": "0"}
    args = testing.serve_args(store, tmp_path / "cache", **settings)
    with testing.RunningServer(args, tmp_path) as server, httpx.Client(timeout=300) as client:
        for _ in range(KEEPER_REQUESTS):
            kept = client.post(f"{server.url}/models/keeper/invoke", json=[1])
            assert kept.status_code == 200, kept.text
        # the memory watch may have evicted it already, to make room for what it kept
        assert client.delete(f"{server.url}/models/keeper").status_code in (200, 404)
        deadline = time.monotonic() + PATIENCE_S
        while (cold := cold_load(client, server.url, 0)).status_code == 507:
            assert time.monotonic() < deadline, cold.text
            time.sleep(1.0)
        assert cold.status_code == 200, cold.text
        assert server_pss_bytes(server.pid) <= BUDGET_BYTES
        assert server.events("worker_exit")[0]["reason"] == "recycled"
