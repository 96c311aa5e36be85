"""cost from a real bench: its serverless figures price what the server itself counted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from helpers.logs import logged
from helpers.toolkit import MODELS

from modelhost import testing
from modelhost.cli.main import main

pytestmark = pytest.mark.e2e
REQUESTS = 200


def invoke(*args: str) -> None:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output


def test_cost_from_bench_prices_the_bytes_the_server_counted(
    server: testing.RunningServer, access_log: Path, tmp_path: Path
) -> None:
    """--bytes-per-request says its default is --from's: the data price is then paid on what
    each request sent and received, as the server's access log counts it."""
    bench_out, cost_out = tmp_path / "bench", tmp_path / "cost"
    invoke("bench", server.url, "--models", ",".join(MODELS), "--requests", str(REQUESTS),
           "--warmup", "0", "--concurrency", "2", "--out", str(bench_out), "--quiet")  # fmt: skip
    invoke("cost", "--from", str(bench_out / "summary.json"), "--out", str(cost_out))
    serverless = json.loads((cost_out / "cost.json").read_text())["serverless"]
    served = [
        line["bytes_in"] + line["bytes_out"]
        for line in logged(access_log, REQUESTS, lambda r: bool(r.get("model")))
    ]
    assert serverless["bytes_per_request"] == pytest.approx(sum(served) / len(served))


def test_cost_with_sizing_url_counts_what_get_sizing_says(
    server: testing.RunningServer, tmp_path: Path
) -> None:
    """`modelhost cost --sizing http://server`: the instances for memory are those the
    server's own `GET /sizing` gives for the hit ratio, rounded up, under every volume's
    count."""
    bench_out, cost_out = tmp_path / "bench", tmp_path / "cost"
    invoke("bench", server.url, "--models", ",".join(MODELS), "--requests", str(REQUESTS),
           "--warmup", "0", "--concurrency", "2", "--out", str(bench_out), "--quiet")  # fmt: skip
    invoke("cost", "--from", str(bench_out / "summary.json"), "--sizing", server.url,
           "--out", str(cost_out))  # fmt: skip
    needed = httpx.get(f"{server.url}/sizing", timeout=30).json()["instancesNeeded"]["0.95"]
    figures = json.loads((cost_out / "cost.json").read_text())
    assert figures["memory_instances"]["needed"] == needed
    assert figures["memory_instances"]["instances"] == max(1, math.ceil(needed))
    assert all(row["instances"] >= math.ceil(needed) for row in figures["savings"])
