"""Tenants' memory shares with real workers: one tenant floods loads of its many cold models
while the other's guaranteed models stay loaded, and the flooding tenant makes room from its own
models only."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

MiB = 2**20
GUARDED = ("tenants/t1/a.joblib", "tenants/t1/b.joblib")
FLOODED = [f"tenants/t2/m{i}.joblib" for i in range(8)]
TENANTS_FILE = """
[default]
memory_max = "64MiB"

[tenants."tenants/t1"]
memory_min = "40MiB"
"""
ROOM_FOR_MODELS = 7  # t1's two and five more: t2's loads press on the budget
FLOOD_CLIENTS = 6
FLOOD_S = 10.0
RETRYABLE = {429, 503, 504, 507}


@pytest.fixture(scope="module")
def quota_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """t1's two names and t2's eight over one trained forest: the cache keys models by name, so
    each is a model of its own, loaded and evicted on its own, of the same footprint."""
    root = tmp_path_factory.mktemp("quotas")
    forest = testing.random_forest(root / ".src/forest.joblib", 8 * MiB, seed=0)
    for name in (*GUARDED, *FLOODED):
        testing.copy_artifact(forest, root / name)
    return root


@pytest.fixture(scope="module")
def quota_server(
    quota_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    """Room for seven forests; tenants by the names' first two segments, t1 guaranteed 40 MiB."""
    work = tmp_path_factory.mktemp("quota-server")
    tenants_file = work / "tenants.toml"
    tenants_file.write_text(TENANTS_FILE)
    args = testing.serve_args(quota_store, work / "cache", workers=2, memory_budget="4GiB")
    with testing.RunningServer(args, work) as probe:
        baseline = httpx.get(f"{probe.url}/stats").json()["memory"]["baselineBytes"]
        footprint = footprint_of(probe.url, GUARDED[0])
    args = testing.serve_args(
        quota_store,
        work / "cache",
        workers=2,
        memory_budget=baseline + ROOM_FOR_MODELS * footprint,
        tenant_from="name:2",
        tenants_file=tenants_file,
    )
    with testing.RunningServer(args, work) as server:
        yield server


def invoke(client: httpx.Client, name: str) -> httpx.Response:
    rows = json.dumps(testing.digits_rows(1))
    return client.post(
        f"/models/{name}/invoke", content=rows, headers={"content-type": "application/json"}
    )


def footprint_of(url: str, name: str) -> int:
    with httpx.Client(base_url=url, timeout=60) as client:
        assert invoke(client, name).status_code == 200
        return int(client.get(f"/models/{name}").json()["memoryBytes"])


def flood(url: str, seed: int, deadline: float, statuses: Counter[int]) -> None:
    """One client of t2: its names in turn, from `seed`, until the deadline."""
    with httpx.Client(base_url=url, timeout=60) as client:
        turn = seed
        while time.monotonic() < deadline:
            statuses[invoke(client, FLOODED[turn % len(FLOODED)]).status_code] += 1
            turn += 1


def test_guaranteed_models_stay_loaded_while_another_tenant_floods(
    quota_server: testing.RunningServer,
) -> None:
    url = quota_server.url
    with httpx.Client(base_url=url, timeout=60) as client:
        for name in GUARDED:
            assert invoke(client, name).status_code == 200
        statuses: Counter[int] = Counter()
        deadline = time.monotonic() + FLOOD_S
        clients = [
            threading.Thread(target=flood, args=(url, seed, deadline, statuses))
            for seed in range(FLOOD_CLIENTS)
        ]
        for each in clients:
            each.start()
        for each in clients:
            each.join(FLOOD_S + 120)
        assert set(statuses) <= {200} | RETRYABLE, statuses
        assert statuses[200] > len(FLOODED), statuses
        # the server's own growth past the budget (memory pressure) may take any model, by
        # design, once the others are gone; no load of t2 took one of t1's
        pressed = {e["model"] for e in quota_server.events("evict") if _pressure(e)}
        for name in GUARDED:
            described = client.get(f"/models/{name}").json()
            assert described.get("state") == "loaded" or name in pressed, described
        t2 = client.get("/tenants/tenants/t2").json()
        assert t2["memoryBytes"] <= 64 * MiB
        assert t2["evictionsSuffered"] > 0 and t2["evictionsCaused"] > 0
    evicted = [e for e in quota_server.events("evict") if not _pressure(e)]
    assert evicted, "the flood never pressed on memory"
    assert {e["detail"].get("tenant") for e in evicted} == {"tenants/t2"}
    assert {e["detail"].get("for_tenant") for e in evicted} == {"tenants/t2"}


def _pressure(event: dict[str, Any]) -> bool:
    return bool(event["reason"] == "memory_pressure")
