"""bench against a real server: its count is the server's, its percentiles are numpy's on its own
CSV, open loop holds the asked rate, and its report opens in Chromium without errors."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import CliRunner
from conftest import MODELS, open_in_chromium

from modelhost import testing
from modelhost.cli.main import main

pytestmark = pytest.mark.e2e


def invocations_counted(url: str) -> float:
    """The server's own count of POST /invocations, from /metrics."""
    pattern = re.compile(r"^modelhost_http_requests_total\{(.*)\} (\S+)$")
    total = 0.0
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        found = pattern.match(line)
        if found and 'route="/invocations"' in found[1] and 'method="POST"' in found[1]:
            total += float(found[2])
    return total


def run_bench(url: str, out: Path, *args: str) -> dict:
    result = CliRunner().invoke(
        main,
        [
            "bench",
            url,
            "--models",
            ",".join(MODELS),
            "--duration",
            "1.5",
            "--warmup",
            "0.5",
            "--processes",
            "2",
            "--out",
            str(out),
            "--quiet",
            *args,
        ],
    )
    assert result.exit_code == 0, result.output
    return json.loads((out / "summary.json").read_text())


def read_rows(out: Path) -> list[dict[str, str]]:
    with open(out / "requests.csv") as rows:
        return list(csv.DictReader(rows))


def test_closed_loop_count_matches_the_server_and_percentiles_match_numpy(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    before = invocations_counted(server.url)
    summary = run_bench(server.url, tmp_path, "--concurrency", "4", "--popularity", "zipf")
    after = invocations_counted(server.url)

    assert summary["requests"]["sent"] == after - before
    rows = read_rows(tmp_path)
    assert len(rows) == summary["requests"]["sent"]
    measured = [float(r["latency_ms"]) for r in rows if r["warmup"] == "0" and r["status"] == "200"]
    assert len(measured) == summary["requests"]["ok"] > 0
    for name, q in {"p50": 50, "p90": 90, "p99": 99, "p99.9": 99.9}.items():
        assert summary["latency_ms"][name] == float(np.percentile(measured, q))
    assert summary["latency_ms"]["max"] == max(measured)
    assert sum(summary["cache"].values()) == summary["requests"]["ok"]
    assert set(summary["cache"]) <= {"hit", "disk", "remote"}
    assert "infer" in summary["server_timing_ms"]
    assert {r["process"] for r in rows} == {"0", "1"}


def test_open_loop_holds_the_asked_rate(server: testing.RunningServer, tmp_path: Path) -> None:
    before = invocations_counted(server.url)
    summary = run_bench(
        server.url, tmp_path, "--rate", "40", "--arrivals", "constant", "--model-in", "path"
    )
    rows = read_rows(tmp_path)
    due = sorted(float(r["intended_s"]) for r in rows)
    # a constant schedule: 40/s over warm-up plus duration (2 s), from both processes together
    assert len(rows) == 80
    assert np.allclose(np.diff(due), 1 / 40, atol=1e-6)
    assert all(float(r["sent_s"]) >= float(r["intended_s"]) for r in rows)
    assert summary["requests"]["measured"] == 60
    assert invocations_counted(server.url) == before  # the model went in the path
    assert summary["rate_rps"] == 40


def test_poisson_arrivals_are_seeded_and_near_the_rate(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    first = run_bench(server.url, tmp_path / "a", "--rate", "50", "--seed", "3")
    second = run_bench(server.url, tmp_path / "b", "--rate", "50", "--seed", "3")
    due_a = [r["intended_s"] for r in read_rows(tmp_path / "a")]
    due_b = [r["intended_s"] for r in read_rows(tmp_path / "b")]
    assert sorted(due_a) == sorted(due_b)
    assert 50 <= len(due_a) <= 150  # 100 expected; Poisson spread, not timing
    assert first["requests"]["sent"] == second["requests"]["sent"]


def test_the_bench_report_opens_without_errors(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    run_bench(server.url, tmp_path, "--concurrency", "2")
    text = open_in_chromium(tmp_path / "report.html", "bench-report.png")
    assert "Latency distribution" in text and "Server-Timing" in text
    assert "[svg charts: 3]" in text
