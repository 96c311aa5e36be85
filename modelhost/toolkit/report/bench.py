"""A bench run's outputs: summary.json, requests.csv (one row per request) and report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from modelhost.toolkit import stats
from modelhost.toolkit.bench import BenchRun
from modelhost.toolkit.loadgen import Row
from modelhost.toolkit.report import charts, files, html


def write_bench(out_dir: Path, run: BenchRun, summary: dict[str, Any]) -> dict[str, Path]:
    paths = {
        "summary": files.write_json(out_dir / "summary.json", summary),
        "csv": files.write_csv(out_dir / "requests.csv", Row._fields, run.rows),
        "html": out_dir / "report.html",
    }
    paths["html"].write_text(bench_page(run, summary))
    return paths


def bench_page(run: BenchRun, summary: dict[str, Any]) -> str:
    good = [row for row in stats.measured(run.rows) if stats.ok(row)]
    levels = summary["latency_by_concurrency"]
    requests, latency = summary["requests"], summary["latency_ms"]
    figures = html.table(
        ["throughput/s", "measured", "ok", *latency],
        [[summary["throughput_rps"], requests["measured"], requests["ok"], *latency.values()]],
    )
    sections = [
        (
            "Summary",
            html.paragraph(
                f"{summary['load']} for {summary['duration_s']} s after "
                f"{summary['warmup_s']} s of warm-up"
            )
            + figures
            + html.warnings(summary["generator"]["warnings"]),
        ),
        (
            "Latency distribution",
            charts.histogram([r.latency_ms for r in good], "Latency of answered requests"),
        ),
        ("Over time", charts.over_time(summary["timeline"])),
        (
            "Latency against concurrency",
            charts.lines(
                [p["concurrency"] for p in levels],
                {"p50": [p["p50_ms"] for p in levels], "p99": [p["p99_ms"] for p in levels]},
                "Latency by requests in flight at send",
                "requests in flight",
                "latency (ms)",
                markers=True,
            ),
        ),
        ("Errors", html.table(stats.ERROR_COLUMNS, stats.error_rows(requests))),
        ("Cache tiers", html.table(["tier", "count"], list(summary["cache"].items()))),
        (
            "Instances (X-Modelhost-Instance)",
            html.table(["instance", "count"], list(summary.get("instances", {}).items())),
        ),
        (
            "Server-Timing (ms)",
            html.table(
                ["part", "mean", "p50", "p99"],
                [
                    [p, f["mean"], f["p50"], f["p99"]]
                    for p, f in summary["server_timing_ms"].items()
                ],
            ),
        ),
    ]
    return html.page(f"modelhost bench: {summary['target']}", sections)
