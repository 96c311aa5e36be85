"""GET /events delivers a load and the eviction it caused, in order; resumes after Last-Event-ID;
filters by model; and does not hold a draining server open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.serving import Servers
from observe_tools import EventReader

from modelhost import testing

pytestmark = pytest.mark.e2e

MiB = 2**20
FORESTS = 16
TRAINED = 4
# a PSS shares library pages with the servers of the tests beside it: two servers' baselines
# differed by 9 MiB under CI's load
BASELINE_DRIFT_BYTES = 16 * MiB
DIGITS = json.dumps(testing.digits_rows(1)[0])


@pytest.fixture(scope="module")
def forest_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Sixteen forests' names over four trained ones: the tests need loads and evictions, not
    distinct answers."""
    root = tmp_path_factory.mktemp("forests")
    for index in range(TRAINED):
        testing.random_forest(root / f"f{index}.joblib", target_bytes=3 * MiB, seed=index)
    for index in range(TRAINED, FORESTS):
        testing.copy_artifact(root / f"f{index % TRAINED}.joblib", root / f"f{index}.joblib")
    return root


@pytest.fixture(scope="module")
def tight_server(forest_store: Path, serve: Servers) -> testing.RunningServer:
    """A server whose memory budget has room for only some of the forests: two, what two loads
    need while they unpickle (about twice a forest each), and its baseline's drift."""
    probe = serve(forest_store, workers=2, memory_budget="4GiB")
    baseline = httpx.get(f"{probe.url}/stats").json()["memory"]["baselineBytes"]
    invoke(probe.url, "f0.joblib")
    footprint = httpx.get(f"{probe.url}/models/f0.joblib").json()["memoryBytes"]
    probe.stop()
    room = (2 + 2 * 2) * footprint + BASELINE_DRIFT_BYTES
    return serve(forest_store, workers=2, memory_budget=baseline + room)


def invoke(url: str, name: str) -> None:
    response = httpx.post(
        f"{url}/models/{name}/invoke",
        content=DIGITS,
        headers={"content-type": "application/json"},
        timeout=60,
    )
    assert response.status_code == 200, response.text


def evicted(events: list[dict[str, Any]]) -> bool:
    return any(e["kind"] == "evict" for e in events)


def cycle_until_an_eviction(url: str, reader: EventReader) -> list[dict[str, Any]]:
    for _round in range(3):
        for index in range(FORESTS):
            invoke(url, f"f{index}.joblib")
            if evicted(reader.events):
                return reader.events
    raise AssertionError(f"no eviction after cycling {FORESTS} forests three times")


def test_load_and_its_eviction_arrive_in_order(
    tight_server: testing.RunningServer,
) -> None:
    """A load and the eviction it caused arrive in order."""
    with EventReader(f"{tight_server.url}/events") as reader:
        cycle_until_an_eviction(tight_server.url, reader)
        events = reader.wait_for(lambda got: cause(got) is not None)
    ids = [e["id"] for e in events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    eviction = next(e for e in events if e["kind"] == "evict")
    assert eviction["reason"] in ("cost-aware", "memory_pressure")  # the default policy
    assert eviction["bytes"] > 0
    detail = eviction["detail"]
    assert 0 < detail["worker_ms"] <= eviction["duration_ms"]  # its part on the worker
    assert detail["longest_idle_s"] >= detail["idle_s"]
    loads = [e for e in events if is_load_of(e, eviction["model"])]
    assert loads and loads[0]["id"] < eviction["id"]  # it was loaded, then evicted
    # what the budget held for each load while it ran, which `simulate --loaders` replays
    assert all(e["detail"]["reserved_bytes"] > 0 for e in events if e["kind"] == "load")
    newcomer = cause(events)
    assert newcomer is not None and newcomer["model"] != eviction["model"]
    if eviction["reason"] != "memory_pressure":  # its loader was held while the victim left
        assert newcomer["detail"]["loader_ms"] >= newcomer["duration_ms"]


def cause(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The load that made the first eviction: the next one when room was made for it (the
    policy's eviction), the one before when its footprint came out larger than reserved
    (memory_pressure)."""
    eviction = next(e for e in events if e["kind"] == "evict")
    loads = [e for e in events if e["kind"] == "load"]
    if eviction["reason"] != "memory_pressure":
        return next((e for e in loads if e["id"] > eviction["id"]), None)
    return ([e for e in loads if e["id"] < eviction["id"]] or [None])[-1]


def test_a_client_resumes_after_its_last_event_id(tight_server: testing.RunningServer) -> None:
    url = tight_server.url
    with EventReader(f"{url}/events") as first:
        cycle_until_an_eviction(url, first)
    seen = first.events
    resume_after = seen[len(seen) // 2]["id"]
    missed = [e for e in seen if e["id"] > resume_after]
    with EventReader(f"{url}/events", {"Last-Event-ID": str(resume_after)}) as resumed:
        replayed = resumed.wait_for(lambda got: len(got) >= len(missed))
    assert replayed[: len(missed)] == missed


def test_a_bad_resume_point_names_the_parameter_given(
    tight_server: testing.RunningServer,
) -> None:
    """A client that sent ?last_event_id= is not told of a header it never sent."""
    response = httpx.get(f"{tight_server.url}/events?last_event_id=abc")
    assert response.status_code == 400 and "last_event_id 'abc'" in response.json()["message"]
    response = httpx.get(f"{tight_server.url}/events", headers={"Last-Event-ID": "x"})
    assert response.status_code == 400 and "Last-Event-ID 'x'" in response.json()["message"]


def test_the_model_filter_keeps_one_models_events(tight_server: testing.RunningServer) -> None:
    url, name = tight_server.url, "f0.joblib"
    with (
        EventReader(f"{url}/events?model={name}") as filtered,
        EventReader(f"{url}/events") as everything,
    ):
        httpx.delete(f"{url}/models/{name}")  # 404 if it is not loaded: either way, then
        invoke(url, name)  # it loads
        invoke(url, "f1.joblib")
        seen = everything.wait_for(lambda got: any(is_load_of(e, name) for e in got))
        mine = [e for e in seen if e.get("model") == name]
        got = filtered.wait_for(lambda got: len(got) >= len(mine))
    assert any(is_load_of(e, name) for e in mine)
    assert got == mine


def is_load_of(event: dict[str, Any], name: str) -> bool:
    return bool(event["kind"] == "load" and event.get("model") == name)


def test_an_open_stream_does_not_hold_a_draining_server(store: Path, tmp_path: Path) -> None:
    # the drain timeout is far beyond stop()'s wait: a stream holding the drain open would end
    # in SIGKILL and a negative exit code, not 0
    args = testing.serve_args(store, tmp_path / "cache", workers=1, drain_timeout_s=600)
    server = testing.RunningServer(args, tmp_path).start()
    try:
        with EventReader(f"{server.url}/events") as reader:
            code = server.stop(timeout=60)
            reader.wait_for(lambda got: False, timeout_s=30)
            assert reader.ended
    finally:
        server.stop()
    assert code == 0, server.log_text()[-2000:]
