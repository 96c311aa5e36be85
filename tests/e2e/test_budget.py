"""The memory budget bounds the whole server as the OS measures it, and LRU decides who goes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers
from pss_sampler import PssSampler

from modelhost import testing
from modelhost.records.memory import pss_bytes
from modelhost.rpc.fronts import FRONTS

pytestmark = pytest.mark.e2e

MiB = 2**20
FORESTS = 8
FRONTEND_ALLOWANCE_BYTES = 64 * MiB  # the default
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def forest_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight copies of one forest (a model is known by its name, never by its bytes), and one
    too large for the budget."""
    root = tmp_path_factory.mktemp("forests")
    first = testing.random_forest(root / "f0.joblib", target_bytes=6 * MiB)
    for index in range(1, FORESTS):
        shutil.copyfile(first, root / f"f{index}.joblib")
    testing.random_forest(root / "huge.joblib", target_bytes=40 * MiB)
    return root


def serve_args(store: Path, work: Path, budget: str) -> list[str]:
    return testing.serve_args(store, work / "cache", workers=2, memory_budget=budget)


@pytest.fixture(scope="module")
def small_server(forest_store: Path, serve: Servers) -> testing.RunningServer:
    """A server whose budget leaves room for about four forests beside the idle server (the
    pinned one, f7, among them), and for what two loads need while they unpickle (about twice a
    forest each): eight forests do not fit."""
    probe = serve(forest_store, workers=2, memory_budget="4GiB")
    baseline = httpx.get(f"{probe.url}/stats").json()["memory"]["baselineBytes"]
    invoke(probe.url, "f0.joblib")
    footprint = httpx.get(f"{probe.url}/models/f0.joblib").json()["memoryBytes"]
    probe.stop()
    budget = baseline + (4 + 2 * 2) * footprint
    lru = {"eviction_policy": "lru", "admission": "none"}  # the order the tests below follow
    return serve(forest_store, workers=2, memory_budget=budget, pinned_models="f7.joblib", **lru)


def invoke(url: str, name: str) -> httpx.Response:
    return httpx.post(
        f"{url}/models/{name}/invoke",
        content=json.dumps(testing.digits_rows(1)[0]),
        headers=JSON,
        timeout=60,
    )


def test_cycling_more_models_than_fit_never_exceeds_the_budget(
    small_server: testing.RunningServer,
) -> None:
    budget = httpx.get(f"{small_server.url}/stats").json()["memory"]["budgetBytes"]
    sampler = PssSampler(small_server.pid)
    sampler.start()
    try:
        for _round in range(2):
            for index in range(FORESTS):
                response = invoke(small_server.url, f"f{index}.joblib")
                assert response.status_code == 200, response.text
    finally:
        sampler.stop()
    assert sampler.samples >= 2 * FORESTS  # at least one sample per load, on a busy machine too
    assert sampler.peak_bytes <= budget, f"peak {sampler.peak_bytes} over budget {budget}"
    models = httpx.get(f"{small_server.url}/models").json()["models"]
    evictions = [e for m in models for e in m["events"] if e["kind"] == "evict"]
    assert evictions and all(e["reason"] in ("lru", "memory_pressure") for e in evictions)
    assert not [e for e in evictions if e["model"] == "f7.joblib"]
    assert invoke(small_server.url, "f7.joblib").headers["x-modelhost-cache"] == "hit"


def test_least_recently_used_goes_first(
    small_server: testing.RunningServer,
) -> None:
    """Least recently used goes first as the cache header shows."""
    url = small_server.url
    for name in ("f0", "f1", "f2"):
        invoke(url, f"{name}.joblib")
    invoke(url, "f0.joblib")  # order of last use now: f1, f2, f0
    for newcomer in ("f3", "f4", "f5", "f6"):  # load others until one of the three must go
        invoke(url, f"{newcomer}.joblib")
        models = httpx.get(f"{url}/models").json()["models"]
        states = {m["modelName"]: m["state"] for m in models}
        evicted = [n for n in ("f1", "f2", "f0") if states.get(f"{n}.joblib") != "loaded"]
        if evicted:
            break
    assert evicted and evicted == ["f1", "f2", "f0"][: len(evicted)]
    assert invoke(url, "f0.joblib").headers["x-modelhost-cache"] == (
        "disk" if "f0" in evicted else "hit"
    )
    assert invoke(url, "f1.joblib").headers["x-modelhost-cache"] == "disk"


def test_model_that_never_fits_is_507(
    small_server: testing.RunningServer,
) -> None:
    """A model that can never fit is 507 and nothing else is disturbed."""
    url = small_server.url
    invoke(url, "f5.joblib")
    response = invoke(url, "huge.joblib")
    assert response.status_code == 507, response.text
    message = response.json()["message"]
    assert "huge.joblib" in message and "memory budget" in message and "MiB" in message
    assert "set --memory-budget to at least" in message  # what to do about it
    assert invoke(url, "f5.joblib").headers["x-modelhost-cache"] == "hit"


@pytest.mark.parametrize("front", [None, *FRONTS])
def test_the_frontend_has_its_whole_allowance_once_serving(
    forest_store: Path, serve: Servers, front: str | None
) -> None:
    """A gRPC front's libraries and threads, which start after the server's first reading, are
    the idle frontend's: its allowance is growth past its size once its ports serve."""
    grpc = {"grpc_port": testing.free_port(), "grpc_front": front} if front else {}
    server = serve(forest_store, workers=1, **grpc)
    allowance = httpx.get(f"{server.url}/stats").json()["memory"]["frontendAllowanceBytes"]
    assert allowance - pss_bytes(server.pid) > 0.9 * FRONTEND_ALLOWANCE_BYTES
    server.stop()


def test_budget_below_idle_server_is_refused(forest_store: Path, tmp_path: Path) -> None:
    """A budget below the idle server is refused at start."""
    command = [
        sys.executable,
        "-m",
        "modelhost",
        "serve",
        *serve_args(forest_store, tmp_path, "40MiB"),
        "--port",
        str(testing.free_port()),
    ]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2
    assert "below what the idle server needs" in finished.stderr
    assert "MiB" in finished.stderr


def test_workers_past_the_budget_are_refused_before_the_rest_fork(
    forest_store: Path, tmp_path: Path
) -> None:
    """`--workers 400` under 300 MiB forked all 400 (4 GiB) before the budget refused them; a
    typo of 100000 ran the machine out of memory first. The first workers, as many as the cores,
    now tell what the rest would take."""
    args = testing.serve_args(forest_store, tmp_path / "cache", workers=400, memory_budget="300MiB")
    port = ["--port", str(testing.free_port())]
    command = [sys.executable, "-m", "modelhost", "serve", *args, *port]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert finished.returncode == 2, finished.stderr
    assert "below what the idle server needs: at least" in finished.stderr
    assert "use fewer --workers (at most" in finished.stderr
    forked = (finished.stdout + finished.stderr).count('"kind":"worker_start"')
    assert 0 < forked <= len(os.sched_getaffinity(0))


@pytest.mark.parametrize(
    ("setting", "value", "says"),
    [
        ("--memory-budget", "1PiB", "usable memory"),
        ("--disk-budget", "1024PiB", "volume"),
    ],
)
def test_budget_larger_than_the_machine_is_refused(
    forest_store: Path, tmp_path: Path, setting: str, value: str, says: str
) -> None:
    """A budget the machine cannot hold is refused at start, naming the setting, the value and
    the most it may be; else the server would run until the kernel killed a worker or the disk
    filled, never evicting."""
    port = str(testing.free_port())
    command = [
        sys.executable,
        "-m",
        "modelhost",
        "serve",
        *serve_args(forest_store, tmp_path, "2GiB"),
    ]
    command += ["--port", port, setting, value]
    command += ["--preload-runtimes", ""]  # refused at start: no model needs its runtime
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert finished.returncode == 2, finished.stderr
    assert f"{setting} {value}" in finished.stderr and says in finished.stderr
    assert f"set {setting} at most" in finished.stderr


def test_empty_budget_variable_is_refused(forest_store: Path, tmp_path: Path) -> None:
    """`MODELHOST_MEMORY_BUDGET=` is a budget given empty, refused, not the default of 80%."""
    command = [sys.executable, "-m", "modelhost", "serve", "--port", str(testing.free_port())]
    command += testing.serve_args(forest_store, tmp_path / "cache", workers=1)
    env = {**os.environ, "MODELHOST_MEMORY_BUDGET": ""}
    finished = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert finished.returncode == 2, finished.stderr
    assert "MODELHOST_MEMORY_BUDGET: expected a value (unset it for the default" in finished.stderr
