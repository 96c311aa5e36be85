"""The synthetic Zipf log reads back as a trace, and simulate replays it with every policy."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from modelhost.cli.main import main
from modelhost.toolkit.simulate.synthetic import Synthetic, records, write
from modelhost.toolkit.simulate.trace import read_access_log


def test_scan_models_are_one_offs() -> None:
    """Scan models are one-offs and each first request is a miss."""
    log = list(records(Synthetic(models=5, requests=200, scan_every=4)))
    scans = [r["model"] for r in log if str(r["model"]).startswith("scan-")]
    assert len(scans) == len(set(scans)) == 50
    seen: set[object] = set()
    for record in log:
        assert (record["cache"] == "miss") == (record["model"] not in seen)
        seen.add(record["model"])


def test_the_same_seed_writes_the_same_log(tmp_path: Path) -> None:
    spec = Synthetic(models=10, requests=100, size_mib=(1.0, 8.0), shift_every=30)
    first = write(tmp_path / "a.jsonl", spec).read_text()
    assert first == write(tmp_path / "b.jsonl", spec).read_text()
    trace = read_access_log(tmp_path / "a.jsonl")
    assert len(trace.models) == len(trace.times) == 100


def test_simulate_replays_every_policy_with_and_without_admission(tmp_path: Path) -> None:
    log = write(tmp_path / "zipf.jsonl", Synthetic(models=20, requests=400, scan_every=5))
    args = ["simulate", str(log), "--budgets", "4MiB,8MiB", "--out", str(tmp_path / "out")]
    args += ["--admission", "none", "--admission", "tinylfu", "--min-residency-s", "1"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "simulate.json").read_text())
    assert set(summary["hit_ratio"]) == {
        "lru",
        "lru+min1s",
        "lru+tinylfu+min1s",
        "cost-aware+min1s",
        "cost-aware+tinylfu+min1s",
        "optimum",
    }
