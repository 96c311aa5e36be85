"""Workers that die, and a server that is told to stop."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = testing.iris_rows(1)[0]
JSON = {"content-type": "application/json"}
# a server refused at start never serves a model: its template need not import the runtimes
NO_PRELOADS = {"preload_runtimes": ""}


def wait_for(condition: object, timeout_s: float = 20.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_a_worker_killed_mid_request_fails_only_that_request(client: httpx.Client) -> None:
    assert client.post("/models/slow/invoke", json={"sleep": 0}).status_code == 200
    worker_pid = client.get("/models/slow").json()["workers"][0]["pid"]
    other = "tenants/t000.joblib"
    client.post(f"/models/{other}/invoke", content=json.dumps(ROW), headers=JSON)
    result: dict[str, httpx.Response] = {}
    sleeper = threading.Thread(
        target=lambda: result.setdefault(
            "slow", client.post("/models/slow/invoke", json={"sleep": 10})
        )
    )
    sleeper.start()
    wait_for(lambda: client.get("/models/slow").json()["inFlight"] == 1)
    os.kill(worker_pid, signal.SIGKILL)
    sleeper.join(timeout=15)
    response = result["slow"]
    assert response.status_code == 503, response.text
    message = response.json()["message"]  # the server did not retry: it may have run in part
    assert "not marked idempotent" in message and "retry is safe" not in message
    assert response.headers.get("retry-after")
    wait_for(lambda: len(client.get("/stats").json()["workers"]) == 2)
    assert worker_pid not in [w["pid"] for w in client.get("/stats").json()["workers"]]
    retry = client.post("/models/slow/invoke", json={"sleep": 0})
    assert retry.status_code == 200 and retry.headers["x-modelhost-cache"] == "disk"
    assert (
        client.post(f"/models/{other}/invoke", content=json.dumps(ROW), headers=JSON).status_code
        == 200
    )


def test_sigterm_finishes_in_flight_requests_then_exits_0(store: Path, tmp_path: Path) -> None:
    args = testing.serve_args(store, tmp_path / "c", workers=1)
    server = testing.RunningServer(args, tmp_path).start()
    result: dict[str, httpx.Response] = {}
    sleeper = threading.Thread(
        target=lambda: result.setdefault(
            "slow", httpx.post(f"{server.url}/models/slow/invoke", json={"sleep": 1.5}, timeout=30)
        )
    )
    sleeper.start()
    time.sleep(0.8)
    code = server.stop(timeout=30)
    sleeper.join()
    assert result["slow"].status_code == 200 and result["slow"].json()["slept"] == 1.5
    assert code == 0
    assert server.leaked_pids == []


SLOW_LOADING_HANDLER = """
import time


class SlowToLoad:
    def initialize(self, context):
        time.sleep(4)

    def handle(self, data, context):
        return [{"ready": True} for _ in data]
"""


def test_load_does_not_stall_inference(store: Path, tmp_path: Path) -> None:
    """Loading one model does not stall inference on the same worker."""
    (store / "slow-load").mkdir(exist_ok=True)
    (store / "slow-load" / "handler.py").write_text(SLOW_LOADING_HANDLER)
    args = testing.serve_args(store, tmp_path / "c", workers=1)
    with (
        testing.RunningServer(args, tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        body = json.dumps(ROW)
        assert client.post("/models/iris.pkl/invoke", content=body, headers=JSON).is_success
        loader = threading.Thread(target=lambda: client.post("/models/slow-load/invoke", json=[1]))
        loader.start()
        wait_for(lambda: client.get("/models/slow-load").status_code == 200)
        answers = [
            client.post("/models/iris.pkl/invoke", content=body, headers=JSON) for _ in range(5)
        ]
        still_loading = client.get("/models/slow-load").json()["state"]
        worker_pid = client.get("/models/iris.pkl").json()["workers"][0]["pid"]
        niceness = threads_niceness(worker_pid)
        main = os.getpriority(os.PRIO_PROCESS, worker_pid)
        loader.join()
    assert [a.status_code for a in answers] == [200] * 5
    assert still_loading == "loading"
    # the loader thread yields the cores to inference: one thread runs 10 nicer than the rest
    assert niceness.count(main + 10) == 1, niceness
    assert set(niceness) == {main, main + 10}, niceness


def threads_niceness(pid: int) -> list[int]:
    """The CPU niceness of each thread of process `pid` (Linux)."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return [os.getpriority(os.PRIO_PROCESS, int(task.name)) for task in tasks]


def test_a_store_refused_at_start_leaves_no_process_behind(tmp_path: Path) -> None:
    """The template is spawned before the store is opened; a refused store stops it too."""
    args = testing.serve_args("ftp://example.com/models", tmp_path / "cache", port=0)
    server = subprocess.Popen(
        [sys.executable, "-m", "modelhost", "serve", *args],
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its session id is its pid, and its children's
    )
    _, stderr = server.communicate(timeout=60)
    assert server.returncode == 2 and "unsupported model store" in stderr
    assert session_members(server.pid) == []


def test_a_taken_port_is_refused_before_serving_is_announced(store: Path, tmp_path: Path) -> None:
    """Exit 2 with the --port advice, as with --fronts, and no 'serving' line first."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        args = testing.serve_args(store, tmp_path / "cache", workers=1, port=port)
        server = subprocess.Popen(
            [sys.executable, "-m", "modelhost", "serve", *args],
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _, stderr = server.communicate(timeout=120)
    assert server.returncode == 2, stderr
    assert f"127.0.0.1:{port}" in stderr and "choose another --port" in stderr
    assert " serving " not in stderr
    assert session_members(server.pid) == []


def test_a_store_folder_that_is_not_there_stops_the_start(tmp_path: Path) -> None:
    """A mistyped --model-store would answer 404 to every model: it is refused, saying why."""
    args = testing.serve_args(tmp_path / "modles", tmp_path / "cache", port=0, **NO_PRELOADS)
    server = refused_start(args)
    assert server.returncode == 2, server.stderr
    assert f"error: the model store {tmp_path / 'modles'} is not a folder" in server.stderr
    assert "serving" not in server.stderr


def test_a_cache_folder_that_cannot_be_made_stops_the_start(store: Path, tmp_path: Path) -> None:
    """A --cache-dir that is a file (or on a read-only volume): an error, not a traceback."""
    taken = tmp_path / "cache"
    taken.write_text("a file where the cache should be")
    args = testing.serve_args(store, taken, port=0, workers=1, **NO_PRELOADS)
    server = refused_start(args)
    assert server.returncode == 2, server.stderr
    assert f"error: cannot use the cache folder {taken}" in server.stderr
    assert "set --cache-dir" in server.stderr and "Traceback" not in server.stderr


@pytest.mark.parametrize("pem", ["missing.pem", "garbage.pem"])
def test_a_certificate_tls_cannot_load_stops_the_start(
    store: Path, tmp_path: Path, pem: str
) -> None:
    """A missing or unreadable --ssl-certfile: an error naming the files, not a traceback."""
    (tmp_path / "garbage.pem").write_text("not a certificate")
    cert = tmp_path / pem
    args = testing.serve_args(store, tmp_path / "cache", port=0, workers=1, **NO_PRELOADS)
    args += ["--ssl-certfile", str(cert), "--ssl-keyfile", str(cert)]
    server = refused_start(args)
    assert server.returncode == 2, server.stderr
    assert f"error: cannot serve HTTPS with --ssl-certfile {cert}" in server.stderr
    assert "Traceback" not in server.stderr


@pytest.mark.parametrize(
    "port_flag", ["port", "management_port", "metrics_port", "grpc_port", "grpc_management_port"]
)
def test_a_taken_port_stops_the_start_with_what_to_do(
    store: Path, tmp_path: Path, port_flag: str
) -> None:
    """No "serving … on http://" line for a port never bound, and an error naming the flag."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        ports = {"port": testing.free_port(), port_flag: port}
        settings = {"host": "127.0.0.1", "workers": 1, **ports, **NO_PRELOADS}
        args = testing.serve_args(store, tmp_path / "cache", **settings)
        server = refused_start(args)
    flag = "--" + port_flag.replace("_", "-")
    assert server.returncode == 2, server.stderr
    assert f"on http://127.0.0.1:{port}" not in server.stderr
    assert f"error: cannot listen on 127.0.0.1:{port}" in server.stderr
    assert f"choose another {flag}" in server.stderr
    assert "worker template" not in server.stderr  # refused before any worker process starts


def refused_start(args: list[str]) -> subprocess.CompletedProcess[str]:
    """`modelhost serve ARGS`, which is expected to stop at start."""
    return subprocess.run(
        [sys.executable, "-m", "modelhost", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def session_members(session_id: int) -> list[int]:
    members = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if int(fields[3]) == session_id:
            members.append(int(stat.parent.name))
    return members
