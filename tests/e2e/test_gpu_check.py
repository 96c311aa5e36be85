"""benchmarks/gpu_check.py's dry run on the CPU: a fake device, small models, short runs. The
same script, with --device cuda, is what a GPU machine runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.timeout(300)
def test_the_gpu_check_runs_dry_on_the_cpu_and_reports_each_figure(tmp_path: Path) -> None:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(BENCHMARKS))
    arguments = ["--device", "cpu", "--fit", "2", "--workers", "1", "--model-mib", "1"]
    arguments += ["--churn-s", "1", "--hits-s", "0.5", "--clients", "4"]
    results = gpu_check.main([*arguments, "--work", str(tmp_path), "--out", str(tmp_path / "out")])
    assert results["within_budget"] and results["device_most_bytes"] > 0
    assert results["moves_refused"] == 0, results["refusals"]
    assert results["driver_past_ledger_most_bytes"] == 0  # the fake's driver counts its ledger
    assert results["answers_differ"] == []
    assert results["wake"]["woken_tier"] == "host"
    assert results["churn"]["requests"] > 0 and 500 not in results["churn"]["errors"]
    assert results["hits"]["per_s"] > 0 and results["in_process_floor"]["per_s"] > 0
    assert (tmp_path / "out" / "gpu_check.md").read_text().startswith("| figure | value |")
