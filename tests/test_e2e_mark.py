"""Every test that starts a real server carries the e2e mark, so `pytest -m "not e2e"` is fast."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import server_audit

TESTS = Path(__file__).parent
# options that leave tests of the suite out of a session's items
NARROWING = ("keyword", "markexpr", "deselect", "lf", "stepwise", "ignore", "ignore_glob")


@pytest.mark.timeout(300)  # collecting the whole suite imports every runtime
def test_every_server_test_is_marked_e2e(request: pytest.FixtureRequest) -> None:
    """The tests starting a server (helpers/server_audit.py) are each marked, and there are
    some: an unmarked one would run in the fast loop."""
    if whole_suite(request.config):  # as `make test`: this session's items are the suite
        servers = server_audit.servers(request.session.items)
    else:
        servers = listed_servers()
    unmarked = [test for mark, test in servers if mark == "unmarked"]
    assert unmarked == [], f"these start a server; mark them pytest.mark.e2e: {unmarked}"
    assert len(servers) > 100, servers


def whole_suite(config: pytest.Config) -> bool:
    """Whether this session collected every test of the suite and deselected none."""
    paths = [(config.rootpath / arg.split("::")[0]).resolve() for arg in config.args]
    narrowed = any(config.getoption(name, None) for name in NARROWING)
    return paths == [TESTS.resolve()] and not narrowed


def listed_servers() -> list[tuple[str, str]]:
    """The audit of a collection of the whole suite in another process."""
    # a listing runs no assert, and rewriting every module's asserts (redone by each run where
    # PYTHONDONTWRITEBYTECODE is set) is some 40 % of the collection's CPU
    command = [sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider"]
    command += ["--assert=plain"]
    command += ["-p", "helpers.server_audit", str(TESTS)]
    env = {**os.environ, "PYTHONPATH": str(TESTS)}
    listing = subprocess.run(
        command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=280
    )
    assert listing.returncode == 0, listing.stdout[-4000:] + listing.stderr[-4000:]
    lines = listing.stdout.splitlines()
    fields = [line.split(" ", 2)[1:] for line in lines if line.startswith("SERVER ")]
    return [(mark, test) for mark, test in fields]
