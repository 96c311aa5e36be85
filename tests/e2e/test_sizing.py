"""The live miss-ratio curve on a real server: it agrees with `modelhost simulate` on the server's
own access log, its thrash alarm fires when the working set is twice the room and stays silent
when it fits, and /sizing, /stats and /metrics say the same."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest
from helpers.serving import Servers

from modelhost import testing
from modelhost.toolkit.simulate import lru
from modelhost.toolkit.simulate.trace import read_access_log

pytestmark = pytest.mark.e2e

MiB = 2**20
MODELS = 24
THRASH_WINDOW_S = 10
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Models of 8 to 16 MiB (so distances in bytes are not counts of models), 288 MiB in all:
    large beside the idle server's baseline, which moves by 20 MiB from one start to another."""
    root = tmp_path_factory.mktemp("sized")
    for i in range(MODELS):
        testing.padded_logreg(root / f"m{i}.joblib", size_of(i), seed=i)
    return root


def size_of(index: int) -> int:
    return (2 + index % 3) * 4 * MiB


def invoke(url: str, name: str, http: httpx.Client | None = None) -> None:
    """One invocation of `name`, on `http`'s connection where given."""
    response = (http or httpx).post(
        f"{url}/models/{name}/invoke",
        content=json.dumps(testing.iris_rows(1)),
        headers=JSON,
        timeout=60,
    )
    assert response.status_code == 200, response.text


def zipf_names(count: int, seed: int = 0) -> list[str]:
    weights = 1 / np.arange(1, MODELS + 1)
    picks = np.random.default_rng(seed).choice(MODELS, size=count, p=weights / weights.sum())
    return [f"m{i}.joblib" for i in picks]


def test_live_curve_matches_simulate(store: Path, serve: Servers, tmp_path: Path) -> None:
    """The live curve is `simulate`'s curve of the same access log.

    The requests of a run, replayed from its access log by `modelhost simulate`'s LRU, hit
    at each room what the server's own curve says."""
    log = tmp_path / "access.jsonl"
    server = serve(store, workers=1, access_log=log)
    with httpx.Client() as http:
        for name in zipf_names(300):
            invoke(server.url, name, http)
    sizing = httpx.get(f"{server.url}/sizing").json()
    footprints = {
        name: httpx.get(f"{server.url}/models/{name}").json()["memoryBytes"]
        for name in {f"m{i}.joblib" for i in range(MODELS)}
    }
    server.stop()
    trace = read_access_log(log, sizes=footprints)
    assert len(trace.models) == 300
    rooms = [point["roomBytes"] for point in sizing["curve"]]
    exact = lru.hit_ratios(lru.stack_distances(trace), rooms)
    live = [point["hitRatio"] for point in sizing["curve"]]
    assert live == pytest.approx(exact, abs=0.005)  # the hour's decay weighs seconds alike
    assert sizing["sample"] == {"names": MODELS, "rate": 1.0}


@pytest.fixture(scope="module")
def roomy(store: Path, serve: Servers) -> tuple[testing.RunningServer, int]:
    """A server every model fits in, and its part of the budget while idle (its baseline and
    headroom floor), read before any request. Only the /stats test invokes on it."""
    server = serve(store, workers=1, memory_budget="4GiB")
    return server, int(httpx.get(f"{server.url}/sizing").json()["fixedBytes"])


@pytest.fixture(scope="module")
def fixed_part(roomy: tuple[testing.RunningServer, int]) -> int:
    return roomy[1]


def uniform_run(
    url: str, models: int, requests: int, until: Callable[[], bool] = lambda: False
) -> None:
    """`requests` invocations spread evenly over `models`, on one connection; stops early once
    `until()`, asked every 20 requests."""
    rng = np.random.default_rng(7)
    with httpx.Client() as http:
        for count, i in enumerate(rng.integers(0, models, requests), start=1):
            invoke(url, f"m{i}.joblib", http)
            if count % 20 == 0 and until():
                return


def alarm_raised(server: testing.RunningServer) -> bool:
    httpx.get(f"{server.url}/sizing")  # reading it closes a window that is due
    return bool(thrash_alarms(server))


def thrash_alarms(server: testing.RunningServer) -> list[dict[str, object]]:
    return [event for event in server.events("thrash")]


def test_thrash_alarm_fires_on_twice_the_room(store: Path, serve: Servers, fixed_part: int) -> None:
    """The thrash alarm fires when the working set is twice the room."""
    server = serve(
        # a window of 10 s holds the alarm's 10 early returns on a loaded machine too (CI missed
        # them once in 5 s)
        store,
        workers=1,
        memory_budget=fixed_part + 90 * MiB,
        thrash_window_s=THRASH_WINDOW_S,
    )
    room = httpx.get(f"{server.url}/sizing").json()["roomBytes"]
    assert 40 * MiB < room <= sum(size_of(i) for i in range(MODELS)) / 2  # a first load: 2.5x
    uniform_run(server.url, MODELS, 300, until=lambda: alarm_raised(server))
    deadline = time.monotonic() + THRASH_WINDOW_S
    # a quiet machine may serve all in the window under way: wait for it to close
    while not alarm_raised(server) and time.monotonic() < deadline:
        time.sleep(0.2)
    alarms = thrash_alarms(server)
    assert alarms and alarms[0]["reason"] == "started"
    detail = alarms[0]["detail"]
    assert isinstance(detail, dict) and detail["early_returns"] >= 0.1 * detail["requests"]
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "modelhost_early_returns_total" in metrics
    assert "modelhost_thrashing" in metrics


def test_thrash_alarm_silent_when_set_fits(store: Path, serve: Servers, fixed_part: int) -> None:
    """The thrash alarm stays silent when the working set fits."""
    server = serve(store, workers=1, memory_budget=fixed_part + 150 * MiB, thrash_window_s=5)
    uniform_run(server.url, 4, 300)
    assert thrash_alarms(server) == []
    assert httpx.get(f"{server.url}/sizing").json()["thrash"]["thrashing"] is False


def test_sizing_stats_and_metrics_say_the_same(roomy: tuple[testing.RunningServer, int]) -> None:
    server, _ = roomy
    for i in range(20):
        invoke(server.url, f"m{i % 4}.joblib")
    sizing = httpx.get(f"{server.url}/sizing").json()
    stats = httpx.get(f"{server.url}/stats").json()["sizing"]
    # the memory watch's reading each second moves the room: one may land between two reads
    assert stats in (sizing, httpx.get(f"{server.url}/sizing").json())
    # a use weighs e^(age / 3600 s), stepped each second: uses seconds apart differ by 0.03%
    hits = pytest.approx(16 / 20, rel=0.01)
    assert sizing["observedHitRatio"] == hits
    assert sizing["predictedHitRatio"] == hits  # all four fit today
    assert sizing["budgetBytes"] == sizing["roomBytes"] + sizing["fixedBytes"]
    needed = sizing["memoryNeededBytes"]["0.9"]
    assert needed is None  # 4 first uses of 20 requests: no room reaches 90% of hits
    day = httpx.get(f"{server.url}/sizing", params={"window": "day"}).json()
    assert day["window"] == "day" and len(day["curve"]) == len(sizing["curve"])
    for in_day, in_hour in zip(day["curve"], sizing["curve"], strict=True):  # decayed alike
        # budgetBytes adds the fixed bytes of its read, which the memory watch moves
        assert in_day["roomBytes"] == in_hour["roomBytes"]
        assert in_day["hitRatio"] == pytest.approx(in_hour["hitRatio"], rel=0.01)
    metrics = httpx.get(f"{server.url}/metrics").text
    factor = sizing["hitRatioAtBudget"]["2"]
    assert f'modelhost_hit_ratio_at_budget{{budget_factor="2"}} {factor}' in metrics
    bad = httpx.get(f"{server.url}/sizing", params={"window": "week"})
    assert bad.status_code == 400 and "hour, day" in bad.json()["message"]


def test_sizing_names_zero_serves_without_a_curve(store: Path, serve: Servers) -> None:
    server = serve(store, workers=1, sizing_names=0)
    invoke(server.url, "m0.joblib")
    sizing = httpx.get(f"{server.url}/sizing").json()
    assert sizing["curve"] == [] and sizing["predictedHitRatio"] is None
    assert sizing["observedHitRatio"] == 0.0
