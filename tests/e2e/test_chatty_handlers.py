"""What a model's own code prints reaches the server's log and never stalls its worker (the
workers' standard output is no pipe that someone must keep reading), and an error it raises,
however long its message, is the request's failure, not its worker's."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

CHATTY = '''
import sys


def handle(data, context):
    """Prints 100 kB on each of stdout and stderr a call, as a verbose handler's logging may."""
    if data is None:
        return None
    print("out:" + "x" * 100_000)
    print("err:" + "y" * 100_000, file=sys.stderr)
    return [{"ok": True} for _ in data]
'''
LONG_ERROR = """
def handle(data, context):
    if data is None:
        return None
    raise ValueError("z" * 2_000_000)  # an error that quotes a whole input
"""
CALLS = 20  # 2 MB of output: far past a pipe's 64 KiB and a reader's buffers


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("output-store")
    (root / "chatty").mkdir()
    (root / "chatty/handler.py").write_text(CHATTY)
    (root / "long-error").mkdir()
    (root / "long-error/handler.py").write_text(LONG_ERROR)
    testing.iris_logreg(root / "iris.joblib")
    return root


def test_a_handler_printing_on_stdout_keeps_answering(store: Path, serve: Servers) -> None:
    server = serve(store, workers=1, default_response_timeout_s=10)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        statuses = [
            client.post("/models/chatty/invoke", json=[1]).status_code for _ in range(CALLS)
        ]
        iris = client.post("/models/iris.joblib/invoke", json=[[5.1, 3.5, 1.4, 0.2]])
    assert statuses == [200] * CALLS
    assert iris.status_code == 200
    log = server.log_text()
    assert log.count("out:xxxx") == CALLS and log.count("err:yyyy") == CALLS


def test_an_error_with_a_long_message_fails_its_request_only(store: Path, serve: Servers) -> None:
    server = serve(store, workers=1, default_response_timeout_s=10)
    with httpx.Client(base_url=server.url, timeout=30) as client:
        failed = client.post("/models/long-error/invoke", json=[1])
        iris = client.post("/models/iris.joblib/invoke", json=[[5.1, 3.5, 1.4, 0.2]])
    assert failed.status_code == 500, failed.text[:300]
    assert failed.json()["message"].startswith("ValueError: zzz")
    assert len(failed.text) < 100_000
    assert iris.status_code == 200
    assert server.events("worker_exit") == []
