"""A model whose requests make its worker keep memory past what its models were measured at
is replaced with its worker, so that it cannot take another tenant's room; one that keeps
doing it is held back. The kernel's OOM killer takes a worker before the frontend."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
    return serve_leaking(store, serve)


def serve_leaking(store: Path, serve: Servers, **settings: Any) -> testing.RunningServer:
    # the default limit, a quarter of the budget: 256 MiB, about seven requests' worth
    return serve(store, workers=1, memory_budget="1GiB", tenant_from="name:1", **settings)


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
        leaks_until_held(client, beside=lambda: quiet(client) == 200)
        assert quiet(client, "large.joblib") == 200
    assert_held_for_growing(server)


@pytest.mark.parametrize("where", ["fronts", "sandbox"])
def test_a_model_keeping_memory_in_a_front_s_batches_or_a_sandbox_is_held_back(
    store: Path, serve: Servers, where: str
) -> None:
    """Hits a front sends its worker past the main process, and a sandboxed worker, which
    reads its memory through a file opened before it confined itself."""
    if where == "fronts":
        server = serve_leaking(store, serve, fronts=2)
    else:
        server = serve_leaking(store, serve, env=os.environ | {"MODELHOST_REFUSE_PICKLE": "true"})
        assert "untrusted models load in sandboxed workers" in server.log_text()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        leaks_until_held(client)
    assert_held_for_growing(server)


def leaks_until_held(client: httpx.Client, beside: Callable[[], bool] = lambda: True) -> None:
    """Leak until refused; a worker confirms its growth a moment after the batch past it."""
    answers: list[httpx.Response] = []
    while len(answers) < 60 and (not answers or answers[-1].status_code in (200, 503)):
        answers.append(client.post("/models/noisy/leaks/invoke", content=b"x"))
        assert beside()
        time.sleep(0.05)
    assert [answer.status_code for answer in answers[:6]] == [200] * 6, answers
    refused = answers[-1]
    assert refused.status_code == 500 and "held back" in refused.json()["message"], refused.text


def assert_held_for_growing(server: testing.RunningServer) -> None:
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
