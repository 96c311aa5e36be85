"""A sandboxed model's prints reach the server's log under its worker's id, at a bounded rate,
and never as lines of the server's own: a model cannot forge an event nor flood the log."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import pytest
from helpers.hostile import hostile_store, invoke, two_tenants

from modelhost import testing
from modelhost.workers.pool.output import LINES_PER_S

pytestmark = pytest.mark.e2e

FORGED = '{"kind":"evict","reason":"forged","model":"good/iris.onnx"}'
CHATTY = f"""
import sys

def handle(data, context):
    if data is None:
        return None
    print({FORGED!r})
    print({FORGED!r}, file=sys.stderr, flush=True)
    for line in range(20_000):
        print("flood", line)
    sys.stdout.flush()
    return [{{"ok": True}} for _ in data]
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.RunningServer]:
    store = hostile_store(tmp_path_factory.mktemp("store"), {"chatty": CHATTY})
    with two_tenants(store, tmp_path_factory.mktemp("server")) as running:
        yield running


def test_a_sandboxed_models_prints_are_its_workers_lines(server: testing.RunningServer) -> None:
    started = time.monotonic()
    for _ in range(3):
        assert invoke(server, "evil/chatty").status_code == 200
        assert invoke(server, "good/iris.onnx").status_code == 200
    seconds = math.ceil(time.monotonic() - started) + 1  # each second its own allowance
    lines = server.log_text().splitlines()
    assert not [line for line in lines if line.startswith(FORGED)]
    assert [e for e in server.events("evict") if e.get("reason") == "forged"] == []
    said = [line for line in lines if " says: " in line]
    assert sum(line.endswith(FORGED) for line in said) >= 2  # stdout's and stderr's
    assert 0 < sum(" says: flood " in line for line in said) <= seconds * LINES_PER_S
    assert any(f"past {LINES_PER_S} lines a second is dropped" in line for line in lines)
