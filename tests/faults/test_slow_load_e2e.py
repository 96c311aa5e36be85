"""A load that misses its deadline once, then loads, is not marked failed: the worker killed
at the deadline takes no further load, even while a helper process it forked keeps its
socket open."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = json.dumps(testing.iris_rows(1)[0])
JSON = {"content-type": "application/json"}
HELPER_S = 15  # the helper outlives its worker by this much, less the load's deadline

FIRST_LOAD_HANGS = '''"""Hangs on its first load; a helper it forks holds its worker's socket."""

import os
import time

MARK = {mark!r}
if not os.path.exists(MARK):
    open(MARK, "w").close()
    if os.fork() == 0:
        time.sleep({helper_s})
        os._exit(0)
    time.sleep(3600)


def handle(data, context):
    if data is None:
        return None
    return [{{"loaded": True}} for _ in data]
'''


def test_a_load_that_hung_once_loads_on_a_fresh_worker(tmp_path: Path, serve: Servers) -> None:
    """The retry that follows a 504 at once goes to the replacement, not to the worker being
    killed: one lost worker is not counted twice, and the model loads."""
    store = tmp_path / "store"
    (store / "slow").mkdir(parents=True)
    source = FIRST_LOAD_HANGS.format(mark=str(tmp_path / "hung-once"), helper_s=HELPER_S)
    (store / "slow" / "handler.py").write_text(source)
    server = serve(store, workers=1, worker_load_timeout_s=3)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        first = client.post("/models/slow/invoke", content=ROW, headers=JSON)
        assert first.status_code == 504, first.text
        second = client.post("/models/slow/invoke", content=ROW, headers=JSON)
        assert second.status_code == 200, second.text
