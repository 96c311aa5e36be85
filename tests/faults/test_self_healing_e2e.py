"""A server that heals itself: the template is supervised, /ping says when workers are missing,
a load that hangs is cut at its deadline, workers ignore SIGTERM and get a scrubbed environment.

Each test waits for the pool to be whole before it starts, so they may run in any order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from helpers.loopback import wait_for
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}
WORKERS = 2
PATIENCE_S = 60.0  # how long a condition may take to come true before the test fails
SECRETS = {
    "MODELHOST_MANAGEMENT_TOKEN": "s3cret-token",
    "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "aws-secret",
    "AWS_SESSION_TOKEN": "aws-session",
}

ENV_HANDLER = '''"""Answers with the names of the environment variables its worker sees."""

import os


def handle(data, context):
    if data is None:
        return None
    return [{"env": sorted(os.environ)} for _ in data]
'''

HANGING_HANDLER = '''"""A handler whose import never finishes."""

import time

time.sleep(3600)


def handle(data, context):
    return data
'''


CRASHING_HANDLER = '''"""A handler whose import ends its process."""

import os

os._exit(3)
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "a.joblib")
    testing.iris_logreg(root / "b.joblib")
    sources = (
        ("env", ENV_HANDLER),
        ("hangs", HANGING_HANDLER),
        ("hangs-again", HANGING_HANDLER),
        ("crashes", CRASHING_HANDLER),
    )
    for name, source in sources:
        (root / name).mkdir()
        (root / name / "handler.py").write_text(source)
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    env = {**os.environ, **SECRETS}
    return serve(store, env=env, workers=WORKERS, worker_load_timeout_s=3)


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        wait_for(lambda: whole(http), "the pool to be whole before the test", PATIENCE_S)
        yield http


def worker_pids(client: httpx.Client) -> list[int]:
    return [worker["pid"] for worker in client.get("/stats").json()["workers"]]


def whole(client: httpx.Client) -> bool:
    return len(worker_pids(client)) == WORKERS and client.get("/ping").status_code == 200


def template_pid(server: testing.RunningServer) -> int:
    for child in psutil.Process(server.pid).children():
        with contextlib.suppress(psutil.Error):  # a zombie not reaped yet
            if "modelhost.workers.template" in child.cmdline():
                return int(child.pid)
    raise AssertionError("the server has no template process")


def invoke(client: httpx.Client, model: str) -> httpx.Response:
    return client.post(f"/models/{model}/invoke", content=ROW, headers=JSON)


def test_workers_get_no_management_token_and_no_aws_keys(client: httpx.Client) -> None:
    response = invoke(client, "env")
    assert response.status_code == 200, response.text
    seen: list[str] = response.json()["env"]
    assert not set(SECRETS) & set(seen), seen
    assert "PATH" in seen and "OMP_NUM_THREADS" in seen


def test_workers_and_the_template_ignore_sigterm(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    before = worker_pids(client)
    for pid in [*before, template_pid(server)]:
        os.kill(pid, signal.SIGTERM)
    for model in ("a.joblib", "b.joblib"):  # answered after the signals arrived
        assert invoke(client, model).status_code == 200
    assert worker_pids(client) == before
    assert all(psutil.pid_exists(pid) for pid in before)


def test_hung_load_fails_at_its_deadline(
    client: httpx.Client,
) -> None:
    """A load that hangs fails at its deadline and its worker is replaced."""
    before = set(worker_pids(client))
    response = invoke(client, "hangs")
    assert response.status_code == 504, response.text
    assert "worker-load-timeout-s" in response.json()["message"]
    wait_for(
        lambda: whole(client) and set(worker_pids(client)) != before, "a replacement", PATIENCE_S
    )
    assert len(before & set(worker_pids(client))) == WORKERS - 1  # only the hung one went
    assert invoke(client, "a.joblib").status_code == 200


def test_a_load_that_kills_its_worker_is_refused_not_tried_again(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """Once tried again, a load that ends its process is the artifact's fault: remembered, so
    that further requests cost no worker (and no other model its copy)."""
    exits = len(server.events("worker_exit"))
    first = invoke(client, "crashes")
    assert first.status_code == 500, first.text
    assert first.json()["type"] == "ModelLoadError"
    assert "died" in first.json()["message"]
    assert_refused_at_no_workers_cost(client, server, "crashes", exits + 2)
    assert invoke(client, "a.joblib").status_code == 200


def test_a_load_that_misses_its_deadline_twice_is_refused_not_tried_again(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """Each hung load costs a worker at its deadline: after two in a row, the load is
    remembered as failed, and further requests cost none."""
    exits = len(server.events("worker_exit"))
    assert invoke(client, "hangs-again").status_code == 504
    second = invoke(client, "hangs-again")  # at once: not to the worker killed for the first
    assert second.status_code == 500, second.text
    assert second.json()["type"] == "ModelLoadError"
    assert "worker-load-timeout-s" in second.json()["message"]
    assert_refused_at_no_workers_cost(client, server, "hangs-again", exits + 2)


def assert_refused_at_no_workers_cost(
    client: httpx.Client, server: testing.RunningServer, name: str, exits: int
) -> None:
    """Once the `exits` the failed loads cost are logged and replaced, the remembered failure
    answers again, and no worker exits for it (a kill's exit is logged after its answer)."""
    logged = lambda: len(server.events("worker_exit")) >= exits and whole(client)  # noqa: E731
    wait_for(logged, "the lost workers' exits and replacements", PATIENCE_S)
    again = invoke(client, name)
    assert again.status_code == 500 and "tried again after" in again.json()["message"]
    assert len(server.events("worker_exit")) == exits


def test_ping_is_503_while_a_worker_is_missing(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    template = template_pid(server)
    os.kill(template, signal.SIGSTOP)  # no replacement can be forked while it is stopped
    try:
        os.kill(worker_pids(client)[0], signal.SIGKILL)
        wait_for(lambda: client.get("/ping").status_code == 503, "/ping to say 503", PATIENCE_S)
        body = client.get("/ping").json()
        assert body["status"] == "Unhealthy" and f"of {WORKERS}" in body["message"], body
    finally:
        os.kill(template, signal.SIGCONT)
    wait_for(lambda: whole(client), "/ping to say 200 once the worker is replaced", PATIENCE_S)


def test_the_template_is_restarted_and_workers_are_replaced_again(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    old_template = template_pid(server)
    os.kill(old_template, signal.SIGKILL)
    wait_for(
        lambda: template_pid_or_none(server) not in (None, old_template),
        "a new template",
        PATIENCE_S,
    )
    os.kill(worker_pids(client)[0], signal.SIGKILL)
    wait_for(lambda: whole(client), "the pool to be whole again", PATIENCE_S)
    answered = invoke(client, "a.joblib")
    assert answered.status_code == 200, answered.text
    events = client.get("/models/a.joblib").json()  # the host still serves
    assert events["modelName"] == "a.joblib"


def template_pid_or_none(server: testing.RunningServer) -> Any:
    try:
        return template_pid(server)
    except AssertionError:
        return None
