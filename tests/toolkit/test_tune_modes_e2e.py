"""tune's modes against real servers: memory mode's cost and cold starts, concurrency mode's
throttles, and a ramp that stops at a real knee (one worker answering a 50 ms model serially);
every chart present in every report, the combined report included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.toolkit import MODELS, SLOW, open_in_chromium

from modelhost.cli.main import main
from modelhost.toolkit.report.tune import LATENCY

pytestmark = pytest.mark.e2e

QUICK = ["--warmup", "0.2", "--p99-limit-ms", "10000"]


def tune(store: Path, out: Path, *args: str, duration: str = "0.5") -> dict[str, Any]:
    """tune's summary; each step measured half a second unless the test compares throughputs."""
    command = ["tune", "--model-store", str(store), *QUICK, "--duration", duration]
    result = CliRunner().invoke(main, [*command, "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    summary: dict[str, Any] = json.loads((out / "tune.json").read_text())
    return summary


def assert_full_record(step: dict[str, Any]) -> None:
    record = [step[f"{name}_ms"] for name in LATENCY if name != "mean"]
    assert record == sorted(record) and record[0] > 0
    assert step["server_cpu_s"] > 0 and step["server_peak_pss_mib"] > 0


def test_memory_mode_costs_each_budget_and_times_cold_starts(store: Path, tmp_path: Path) -> None:
    summary = tune(
        store,
        tmp_path,
        "--mode", "memory",
        "--grid", "memory-budget=1GiB,2GiB",
        "--grid", "workers=1",
        "--models", ",".join(MODELS),
        "--concurrency", "1,2",
        "--price-per-gb-hour", "0.05",
    )  # fmt: skip
    assert {s["memory-budget"] for s in summary["steps"]} == {"1GiB", "2GiB"}
    for step in summary["steps"]:
        assert_full_record(step)
        gib = {"1GiB": 1, "2GiB": 2}[step["memory-budget"]]
        expected = 0.05 * gib / (step["throughput_rps"] * 3600) * 1e6
        assert step["cost_per_million"] == pytest.approx(expected)
    inside = [s for s in summary["steps"] if s["within_limit"]]
    assert summary["recommended"] == min(inside, key=lambda s: s["cost_per_million"])
    for point in summary["points"]:  # a fresh server: the first request loaded it
        cold = point["cold_start"]
        assert cold["status"] == 200 and cold["model"] == MODELS[0]
        assert cold["cache"] in ("disk", "remote")  # not yet in memory: loaded for this request
        assert cold["server_timing_ms"]["load"] > 0
        assert cold["first_answer_ms"] >= cold["server_timing_ms"]["load"]
    text = open_in_chromium(tmp_path / "tune.html", "tune-memory-report.png")
    assert "Cold start" in text and "first answer ms" in text
    assert "[svg charts: 7]" in text  # 3 per budget, and cost against p99


def test_concurrency_mode_runs_every_multiplier_and_counts_throttles(
    store: Path, tmp_path: Path
) -> None:
    summary = tune(
        store,
        tmp_path,
        "--mode", "concurrency",
        "--grid", "max-concurrency=1,2",
        "--grid", "workers=1",
        "--multipliers", "1,4",
        "--models", SLOW,
    )  # fmt: skip
    users = [(s["max-concurrency"], s["concurrency"]) for s in summary["steps"]]
    assert users == [("1", 1), ("1", 4), ("2", 2), ("2", 8)]
    over = [s for s in summary["steps"] if s["concurrency"] > int(s["max-concurrency"])]
    for step in over:  # more users than the server admits: it answers 429
        assert step["throttled"] > 0 and step["errors_by_status"]["429"] == step["throttled"]
        assert not step["within_limit"]
    assert summary["recommended"]["errors"] == 0
    text = open_in_chromium(tmp_path / "tune.html", "tune-concurrency-report.png")
    assert "[svg charts: 7]" in text


def test_the_ramp_stops_at_a_real_knee(store: Path, tmp_path: Path) -> None:
    summary = tune(
        store,
        tmp_path / "knee",
        "--grid", "workers=1",
        "--models", SLOW,
        "--concurrency", "1,2,4,8",
        "--min-gain", "0.5",
        duration="1",
    )  # fmt: skip
    steps = summary["steps"]
    # one worker sleeping 50 ms a request runs two at most (measured: 19/s, 38/s, then 40/s at
    # 4 users): past that, users only queue, so the ramp ends before its last rung
    assert len(steps) < 4 and steps[-1]["stop"].startswith("throughput grew <")
    assert steps[-1]["throughput_rps"] < 1.5 * max(s["throughput_rps"] for s in steps[:-1])
    assert steps[-1]["p50_ms"] > 1.5 * steps[0]["p50_ms"]  # the last rung's users queued
    first = tmp_path / "knee" / "tune.json"

    # a second run to combine: one rung, as the report draws each run's charts however many
    other = tune(store, tmp_path / "fast", "--grid", "workers=1", "--models", MODELS[0],
                 "--concurrency", "1")  # fmt: skip
    assert other["steps"]
    result = CliRunner().invoke(
        main,
        [
            "tune",
            "--combine", str(first),
            "--combine", str(tmp_path / "fast" / "tune.json"),
            "--out", str(tmp_path / "both"),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    text = open_in_chromium(tmp_path / "both" / "combined.html", "tune-combined-report.png")
    assert "knee (grid)" in text and "fast (grid)" in text
    assert "[svg charts: 9]" in text  # all runs' cost, then each run's three and its cost
