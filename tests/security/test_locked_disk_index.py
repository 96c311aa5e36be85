"""Another process holding the disk index's lock (an operator's shell, a backup, a second server
on the same cache dir) costs only the loads that must write a new entry: they answer 503 with the
way out, while loaded models answer, /ping answers, and the lock's end brings the loads back."""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost import testing
from modelhost.cache.disk_index import INDEX_FILE

pytestmark = pytest.mark.e2e

ROW = testing.iris_rows(1)[0]
WARM = "/models/archives/m.tar.gz/invoke"
COLD = "/models/archives/cold.tar.gz/invoke"
IN_PLACE = "/models/tenants/t000.joblib/invoke"  # read from the store's folder, no entry


@pytest.fixture
def locked(cache_dir: Path) -> Iterator[sqlite3.Connection]:
    """Another connection to the index, as an operator's shell would open."""
    other = sqlite3.connect(cache_dir / INDEX_FILE, isolation_level=None)
    try:
        yield other
    finally:
        other.close()


def pings_during(client: httpx.Client, request: threading.Thread) -> list[float]:
    """Latencies in ms of /ping, one after another, while `request` runs."""
    latencies_ms = []
    request.start()
    while request.is_alive():
        started = time.perf_counter()
        assert client.get("/ping").status_code == 200
        latencies_ms.append((time.perf_counter() - started) * 1000)
    request.join()
    return latencies_ms


def test_a_locked_index_is_503_for_new_entries_only(
    client: httpx.Client, store: Path, locked: sqlite3.Connection
) -> None:
    """Locked: a cold archive answers 503 saying what to do; a loaded model, a model read in
    place and /ping answer 200. Unlocked: the cold archive loads."""
    shutil.copy(store / "archives/m.tar.gz", store / "archives/cold.tar.gz")
    assert client.post(WARM, json=[ROW]).status_code == 200
    locked.execute("BEGIN EXCLUSIVE")
    answers: list[httpx.Response] = []
    cold = threading.Thread(target=lambda: answers.append(client.post(COLD, json=[ROW])))
    latencies_ms = pings_during(client, cold)
    [refused] = answers
    print(f"/ping max {max(latencies_ms):.1f} ms of {len(latencies_ms)}, 503 in {refused.elapsed}")
    assert refused.status_code == 503, refused.text
    assert "locked by another process" in refused.json()["message"]
    assert client.post(WARM, json=[ROW]).status_code == 200
    assert client.post(IN_PLACE, json=ROW).status_code == 200
    locked.close()
    loaded = client.post(COLD, json=[ROW])
    assert loaded.status_code == 200, loaded.text
