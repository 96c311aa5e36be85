"""SIGTERM sent to the server's whole process group (systemd's default, `docker stop` through
an init that signals the group) loses no request: workers ignore it, the frontend drains, then
stops them, and exits 0."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e


def test_a_group_sigterm_lets_in_flight_requests_finish(tmp_path: Path) -> None:
    store = tmp_path / "store"
    testing.slow_handler_folder(store / "slow")
    args = testing.serve_args(store, tmp_path / "cache", workers=1, drain_timeout_s=30)
    server = testing.RunningServer(args, tmp_path).start()
    try:
        url = f"{server.url}/models/slow/invoke"
        assert httpx.post(url, json={"sleep": 0}, timeout=60).status_code == 200  # loaded
        answers: list[httpx.Response] = []
        started = threading.Event()

        def slow_request() -> None:
            started.set()
            answers.append(httpx.post(url, json={"sleep": 3.0}, timeout=60))

        thread = threading.Thread(target=slow_request)
        thread.start()
        started.wait()
        wait_in_flight(server)
        os.killpg(server.pid, signal.SIGTERM)  # the frontend, the template and the worker
        thread.join(60)
    finally:
        code = server.stop()
    assert answers and answers[0].status_code == 200, answers[0].text if answers else "none"
    assert answers[0].json() == {"slept": 3.0}
    assert code == 0
    assert not server.leaked_pids


def wait_in_flight(server: testing.RunningServer) -> None:
    """Until the worker holds the slow request."""
    for _ in range(600):
        workers = httpx.get(f"{server.url}/stats", timeout=10).json()["workers"]
        if any(worker["inFlight"] for worker in workers):
            return
        threading.Event().wait(0.01)
    raise AssertionError("the slow request never reached the worker")
