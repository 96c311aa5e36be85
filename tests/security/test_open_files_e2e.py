"""A server started under the soft limit of 1024 open files that many systems give: a client
holding more connections than that does not lock everyone else out, as each connection is a
file and the hard limit is the one that binds."""

from __future__ import annotations

import contextlib
import resource
import shutil
import socket
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

SOFT, HARD = 1024, 8192
HELD = 1100  # connections, each its head half sent


@pytest.mark.skipif(shutil.which("prlimit") is None, reason="needs prlimit (util-linux)")
def test_more_connections_than_the_soft_limit_of_open_files_leave_ping_answered(
    tmp_path: Path,
) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < 2 * HELD:
        pytest.skip(f"this test's own connections need {2 * HELD} open files, above {hard}")
    if soft < 2 * HELD:  # this test's own connections
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2 * HELD), hard))
    testing.iris_logreg(tmp_path / "store/iris.joblib")
    args = testing.serve_args(tmp_path / "store", tmp_path / "cache", workers=1)
    prefix = ["prlimit", f"--nofile={SOFT}:{HARD}", "--"]
    with (
        testing.RunningServer(args, tmp_path, prefix=prefix) as server,
        contextlib.ExitStack() as held,
    ):
        for _ in range(HELD):
            connection = held.enter_context(socket.create_connection(("127.0.0.1", server.port)))
            connection.sendall(b"GET /ping HTTP/1.1\r\nHost: localhost\r\n")
        assert httpx.get(f"{server.url}/ping", timeout=10).status_code == 200
