"""bench's tenants against a real server: each tenant's requests and refusals are the ones the
server counted under that tenant, by header and by the models' folders."""

from __future__ import annotations

import csv
import json
from collections import Counter
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from helpers.logs import logged
from helpers.serving import Servers
from helpers.toolkit import MODELS

from modelhost import testing
from modelhost.cli.main import main

pytestmark = pytest.mark.e2e

MISSING = "tenants/missing.joblib"  # a 404 for whichever tenant it is dealt to
BY_FOLDER = ["acme/a.joblib", "acme/b.joblib", "zeta/c.joblib"]


def run_bench(url: str, out: Path, models: list[str], *args: str) -> dict:
    result = CliRunner().invoke(
        main,
        [
            *("bench", url, "--models", ",".join(models), "--concurrency", "4"),
            *("--duration", "0.5", "--warmup", "0.5", "--processes", "2", "--quiet"),
            *("--out", str(out), *args),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "by tenant" in result.output
    return json.loads((out / "summary.json").read_text())


def rows_by_tenant(out: Path) -> dict[str, list[dict[str, str]]]:
    by_tenant: dict[str, list[dict[str, str]]] = {}
    with open(out / "requests.csv") as rows:
        for row in csv.DictReader(rows):
            by_tenant.setdefault(row["tenant"], []).append(row)
    return by_tenant


def counted(url: str, tenant: str) -> dict:
    return httpx.get(f"{url}/tenants/{tenant}", timeout=30).json()


def test_header_tenants_are_the_servers_tenants(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    """Four models dealt to two tenants, t001 holding the missing one: the server counts each
    tenant's every request, and t001's refusals are its 404s."""
    log = tmp_path / "access.jsonl"
    server = serve(store, workers=1, memory_budget="2GiB", tenant_from="header", access_log=log)
    models = [*MODELS[:3], MISSING]
    skew = ("--popularity", "two-class", "--hot-models", "0.5", "--hot-requests", "0.75")
    summary = run_bench(
        server.url, tmp_path, models, "--tenant-from", "header", "--tenants", "2", *skew
    )
    sent = rows_by_tenant(tmp_path)
    assert set(sent) == set(summary["tenants"]) == {"t000", "t001"}
    for tenant, rows in sent.items():
        assert counted(server.url, tenant)["requests"] == len(rows)
    measured = [row for row in sent["t001"] if row["warmup"] == "0"]
    missing = sum(row["status"] == "404" for row in measured)
    assert summary["tenants"]["t001"]["refused"] == {"404": missing} and missing > 0
    assert summary["tenants"]["t000"]["refused"] == {}
    assert {row["model"] for row in sent["t000"]} == {MODELS[0], MODELS[2]}
    figures = summary["tenants"]["t000"]
    assert figures["ok"] == figures["requests"] > 0
    assert figures["latency_ms"]["p50"] <= figures["latency_ms"]["p99"]
    answered = Counter(t for t, rows in sent.items() for row in rows if row["status"] == "200")
    assert simulated(log, sum(len(rows) for rows in sent.values())) == answered


def simulated(log: Path, lines: int) -> Counter[str]:
    """Each tenant's requests as `simulate --tenant-from header` replays the server's log, once
    it holds its `lines`."""
    logged(log, lines)
    out = log.parent / "simulated"
    args = ["simulate", str(log), "--default-size", "1MiB", "--budgets", "1MiB", "--no-optimum"]
    result = CliRunner().invoke(main, [*args, "--tenant-from", "header", "--out", str(out)])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "tenants.json").read_text())["runs"][0]
    return Counter({tenant: f["requests"] for tenant, f in run["tenants"].items()})


def test_folder_tenants_are_the_servers_tenants(serve: Servers, tmp_path: Path) -> None:
    store = tmp_path / "store"
    for name in BY_FOLDER:
        testing.iris_logreg(store / name)
    server = serve(store, workers=1, memory_budget="2GiB", tenant_from="name:1")
    summary = run_bench(server.url, tmp_path / "out", BY_FOLDER, "--tenant-from", "name:1")
    sent = rows_by_tenant(tmp_path / "out")
    assert set(summary["tenants"]) == {"acme", "zeta"}
    for tenant, rows in sent.items():
        assert counted(server.url, tenant)["requests"] == len(rows)
    models = Counter(row["model"].split("/")[0] for rows in sent.values() for row in rows)
    assert models == Counter({tenant: len(rows) for tenant, rows in sent.items()})
