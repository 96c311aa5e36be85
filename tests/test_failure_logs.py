"""A failed test's report carries the tail of its servers' logs; a passing one carries none."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

TESTS = Path(__file__).parent

MODULE = """
import pytest
from helpers.serving import Servers
from modelhost import testing


def logged(folder, name):
    server = testing.RunningServer([], folder)  # never started: its log is written here
    server.log_path.write_text("".join(f"{name} line {i}\\n" for i in range(100)))
    return server


@pytest.fixture
def server(tmp_path):
    return logged(tmp_path, "fixture")


@pytest.fixture
def serve(tmp_path_factory):
    servers = Servers(tmp_path_factory)
    servers.started.append(logged(tmp_path_factory.mktemp("s"), "served"))
    return servers


def test_fails(server, serve):
    assert False


def test_passes(server):
    pass
"""


def test_a_failed_tests_report_ends_with_its_servers_log_tails(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from helpers.failure_logs import pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "test_logged.py").write_text(textwrap.dedent(MODULE))
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "test_logged.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout.count("log of the server at http://127.0.0.1:") == 2, run.stdout
    for name in ("fixture", "served"):
        assert f"{name} line 99" in run.stdout and f"{name} line 60" in run.stdout
        assert f"{name} line 59" not in run.stdout
