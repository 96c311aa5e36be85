"""A model whose requests make its worker keep memory past what its models were measured at
is replaced with its worker, so that it cannot take another tenant's room; one that keeps
doing it is held back. The kernel's OOM killer takes a worker before the frontend."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = json.dumps(testing.iris_rows(1))
JSON = {"content-type": "application/json"}
LEAK_MIB = 40

# keeps LEAK_MIB of touched memory a request, as a handler caching every input would
LEAKING_HANDLER = f'''"""Answers, and keeps what it was asked for."""

KEPT = []


def handle(data, context):
    if data is None:
        return None
    for _ in data:
        kept = bytearray({LEAK_MIB} << 20)
        kept[::4096] = b"x" * len(kept[::4096])
        KEPT.append(kept)
    return [{{"kept_mib": {LEAK_MIB} * len(KEPT)}} for _ in data]
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "quiet" / "iris.joblib")
    testing.padded_logreg(root / "quiet" / "large.joblib", 100 << 20)
    (root / "noisy" / "leaks").mkdir(parents=True)
    (root / "noisy" / "leaks" / "handler.py").write_text(LEAKING_HANDLER)
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    # the default limit, a quarter of the budget: 256 MiB, about seven requests' worth
    return serve(store, workers=1, memory_budget="1GiB", tenant_from="name:1")


def quiet(client: httpx.Client, model: str = "iris.joblib") -> int:
    return client.post(f"/models/quiet/{model}/invoke", content=ROWS, headers=JSON).status_code


def test_a_model_keeping_memory_is_replaced_with_its_worker_then_held_back(
    server: testing.RunningServer,
) -> None:
    """Twenty requests would keep 800 MiB, more than the models' 746 MiB of room: the worker
    is replaced each time it keeps past the limit, and at the second the model is held back.
    The other tenant's model beside it answers throughout, and its large model has room after."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        assert quiet(client) == 200
        statuses = []
        for _ in range(20):
            statuses.append(client.post("/models/noisy/leaks/invoke", content=b"x").status_code)
            assert quiet(client) == 200
        refused = client.post("/models/noisy/leaks/invoke", content=b"x")
        assert quiet(client, "large.joblib") == 200
    assert statuses[:6] == [200] * 6, statuses
    assert refused.status_code == 500 and "held back" in refused.json()["message"], refused.text
    grown = [e for e in server.events("worker_exit") if e["reason"] == "grown"]
    assert [e["detail"]["model"] for e in grown] == ["noisy/leaks"] * 2, grown
    assert all(e["detail"]["grown_bytes"] > 256 << 20 for e in grown), grown
    held = [e["model"] for e in server.events("failure") if e.get("reason") == "held_back"]
    assert held == ["noisy/leaks"]


def test_the_kernel_s_oom_killer_takes_a_worker_first(server: testing.RunningServer) -> None:
    """Workers' OOM score is raised to the most, the frontend's left as it was."""
    workers = httpx.get(f"{server.url}/stats").json()["workers"]
    assert workers
    for worker in workers:
        assert Path(f"/proc/{worker['pid']}/oom_score_adj").read_text().strip() == "1000"
    assert Path(f"/proc/{server.pid}/oom_score_adj").read_text().strip() == "0"
