"""tune against real servers: its recommendation is the best point of its own table; simulate on
the access log a real server wrote; the tune, simulate and cost reports open without errors."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from helpers.logs import logged
from helpers.serving import Servers
from helpers.toolkit import MODELS, open_in_chromium

from modelhost import testing
from modelhost.cli.main import main
from modelhost.toolkit.cost import EXAMPLE_PRICES
from modelhost.toolkit.ramp import Point, Step, recommend, step_of
from modelhost.toolkit.report.tune import verdict
from modelhost.toolkit.tune import TuneOptions, tune_summary

pytestmark = pytest.mark.e2e


def invoke(*args: str) -> None:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output


def test_tune_recommends_the_best_point_of_its_own_table(store: Path, tmp_path: Path) -> None:
    invoke(
        "tune",
        "--model-store",
        str(store),
        "--models",
        ",".join(MODELS),
        "--grid",
        "workers=1,2",
        "--grid",
        "memory-budget=1GiB",
        "--concurrency",
        "1,4",
        "--p99-limit-ms",
        "10000",
        "--duration",
        "0.5",
        "--warmup",
        "0.3",
        "--out",
        str(tmp_path),
    )
    summary = json.loads((tmp_path / "tune.json").read_text())
    steps = summary["steps"]
    assert {step["workers"] for step in steps} == {"1", "2"}
    inside = [s for s in steps if s["within_limit"]]
    assert inside and summary["recommended"] == max(inside, key=lambda s: s["throughput_rps"])
    text = open_in_chromium(tmp_path / "tune.html", "tune-report.png")
    assert "Recommended: workers=" in text


def summary(rps: float, p99: float) -> dict:
    return {
        "requests": {"measured": 10, "ok": 10, "errors": {}},
        "throughput_rps": rps,
        "latency_ms": {"p50": p99 / 2, "p95": p99 * 0.9, "p99": p99},
    }


def test_recommend_takes_the_most_throughput_inside_the_limit() -> None:
    steps: list[Step] = [
        step_of({"workers": "1"}, 1, summary(100, 5), 50),
        step_of({"workers": "1"}, 2, summary(300, 60), 50),
        step_of({"workers": "2"}, 2, summary(150, 20), 50),
    ]
    assert recommend(steps) == 2


@pytest.mark.parametrize(
    ("price", "labelled"), [(EXAMPLE_PRICES["instance_per_hour"], True), (0.5, False)]
)
def test_an_example_instance_price_is_labelled(price: float, labelled: bool) -> None:
    """The default --instance-price is an example: the recommendation's cost says so."""
    step = step_of({"workers": "1"}, 1, summary(100, 5), 50)
    options = TuneOptions(model_store="s", grid=("workers=1",), instance_price=price)
    result = tune_summary(options, [Point({"workers": "1"}, {}, [step])])
    assert ("example" in verdict(result)) is labelled
    assert ("example" in result["cost_basis"]) is labelled


def test_memory_mode_without_a_price_is_refused() -> None:
    """Memory mode ranks budgets by cost: at no price every step costs $0 and the first, the
    slowest, would be recommended."""
    options = TuneOptions(model_store="s", mode="memory", grid=("memory-budget=1GiB,2GiB",))
    with pytest.raises(ValueError, match="give --price-per-gb-hour"):
        options.target()


def test_simulate_replays_a_real_servers_access_log(
    server: testing.RunningServer, access_log: Path, tmp_path: Path
) -> None:
    invoke(
        "bench",
        server.url,
        "--models",
        ",".join(MODELS),
        "--popularity",
        "zipf",
        "--concurrency",
        "2",
        "--duration",
        "0.5",  # enough requests for a log: the test checks the replay, not a rate
        "--warmup",
        "0",
        "--processes",
        "1",
        "--quiet",
        "--out",
        str(tmp_path / "bench"),
    )
    sizes = tmp_path / "sizes.json"
    sizes.write_text(json.dumps({name: (i + 1) * 2**20 for i, name in enumerate(MODELS)}))
    invoke(
        "simulate",
        str(access_log),
        "--sizes",
        str(sizes),
        "--target",
        "0.5",
        "--out",
        str(tmp_path / "sim"),
    )
    summary = json.loads((tmp_path / "sim" / "simulate.json").read_text())
    assert summary["models"] == len(MODELS)
    assert summary["hit_ratio"]["lru"][-1] == pytest.approx(1 - 3 / summary["requests"])
    for policy in ("lru", "cost-aware"):
        for ratio, bound in zip(
            summary["hit_ratio"][policy], summary["hit_ratio"]["optimum"], strict=True
        ):
            assert ratio <= bound + 1e-9
    text = open_in_chromium(tmp_path / "sim" / "simulate.html", "simulate-report.png")
    assert "Hit-ratio curve" in text and "[svg charts: 1]" in text


def test_simulate_replays_logged_loads(
    server: testing.RunningServer, access_log: Path, tmp_path: Path
) -> None:
    """`simulate` replays the server's loads in line from its log."""
    started = round(time.time(), 3)
    for name in MODELS:  # each loaded (once: they all fit), so the log has a load of each
        response = httpx.post(f"{server.url}/models/{name}/invoke", json=testing.iris_rows(1))
        assert response.status_code == 200, response.text
    logged(access_log, 1, lambda r: r.get("model") == name and r["time"] >= started)
    sizes = tmp_path / "sizes.json"
    sizes.write_text(json.dumps(dict.fromkeys(MODELS, 2**20)))
    common = ["simulate", str(access_log), "--sizes", str(sizes), "--budgets", "1MiB,3MiB"]
    out = tmp_path / "sim"
    invoke(*common, "--loaders", "1", "--load-events", str(server.log_path), "--out", str(out))
    ratios = json.loads((out / "simulate.json").read_text())["hit_ratio"]
    requests = json.loads((out / "simulate.json").read_text())["requests"]
    for label in ("lru", "cost-aware"):
        assert len(ratios[f"{label} in line"]) == 2
    # room for all: each model loads once, and a request that waited for its load is no hit
    assert ratios["lru in line"][1] <= ratios["lru"][1] == pytest.approx(1 - 3 / requests)
    refused = CliRunner().invoke(main, [*common, "--loaders", "1", "--out", str(out)])
    assert refused.exit_code == 2 and "--loaders needs --load-events" in refused.output


def test_the_cost_report_opens_without_errors(tmp_path: Path) -> None:
    invoke("cost", "--throughput", "100", "--latency-ms", "50", "--out", str(tmp_path))
    text = open_in_chromium(tmp_path / "cost.html", "cost-report.png")
    assert "example" in text


def test_simulate_sizes_the_models_by_the_loads_in_the_log(
    serve: Servers, store: Path, tmp_path: Path
) -> None:
    """A request that loaded its model logs the model's size, so no --sizes is needed."""
    log = tmp_path / "access.jsonl"
    server = serve(store, workers=1, memory_budget="2GiB", access_log=log)
    for name in MODELS[:2] * 2:
        response = httpx.post(f"{server.url}/models/{name}/invoke", json=testing.iris_rows(1))
        assert response.status_code == 200, response.text
    lines = logged(log, 4)
    events = server.events()
    loaded = {event["model"]: event["bytes"] for event in events if event["kind"] == "load"}
    sized = {line["model"]: line["model_bytes"] for line in lines if "model_bytes" in line}
    assert sized == loaded and set(sized) == set(MODELS[:2])
    assert not any("model_bytes" in line for line in lines if line.get("cache") != "disk")
    invoke("simulate", str(log), "--budgets", "1MiB", "--out", str(tmp_path / "sim"))
