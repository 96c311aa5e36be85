"""Every test that starts a real server carries the e2e mark, so `pytest -m "not e2e"` is fast."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


@pytest.mark.timeout(300)  # collecting the whole suite imports every runtime
def test_every_server_test_is_marked_e2e() -> None:
    """A collection that lists the tests starting a server (helpers/server_audit.py) finds each
    marked, and finds some: an unmarked one would run in the fast loop."""
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
    servers = [line.split(" ", 2)[1:] for line in lines if line.startswith("SERVER ")]
    unmarked = [test for mark, test in servers if mark == "unmarked"]
    assert unmarked == [], f"these start a server; mark them pytest.mark.e2e: {unmarked}"
    assert len(servers) > 100, listing.stdout[-4000:]
