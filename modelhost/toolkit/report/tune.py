"""A tune run's outputs: tune.json, tune.csv and tune.html, and the combined report of runs."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from modelhost.toolkit.ramp import efficient_frontier
from modelhost.toolkit.report import charts, files, html

LATENCY = ["min", "mean", "p50", "p90", "p95", "p99", "p99.9", "max"]
COLUMNS = [
    "concurrency",
    "throughput_rps",
    *(f"{name}_ms" for name in LATENCY),
    "errors",
    "throttled",
    "server_cpu_s",
    "server_peak_pss_mib",
    "cost_per_million",
    "within_limit",
    "stop",
]
TERMINAL = [  # what a person compares first; the files keep every column
    "concurrency",
    "throughput_rps",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "errors",
    "server_cpu_s",
    "server_peak_pss_mib",
    "cost_per_million",
    "stop",
]


def table_of(
    summary: dict[str, Any], columns: list[str] = TERMINAL
) -> tuple[list[str], list[list[Any]]]:
    header = [*summary["settings"], *columns]
    return header, [[row.get(name, "") for name in header] for row in summary["steps"]]


def label_of(summary: dict[str, Any], row: dict[str, Any]) -> str:
    return " ".join(f"{n}={row[n]}" for n in summary["settings"]) or "server"


def by_configuration(summary: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = {}
    for row in summary["steps"]:
        groups.setdefault(label_of(summary, row), []).append(row)
    return groups


def verdict(summary: dict[str, Any]) -> str:
    best = summary["recommended"]
    if not best:
        said = f"No point held p99 under {summary['p99_limit_ms']:g} ms without errors"
        return said + errors_said(summary["steps"])
    settings = ", ".join(f"{n}={best[n]}" for n in summary["settings"]) or "the server"
    example = summary.get("example_price", False)
    return (
        f"Recommended: {settings} at {best['concurrency']} users, "
        f"{best['throughput_rps']:.1f} req/s, p95 {best['p95_ms']:.1f} ms, "
        f"p99 {best['p99_ms']:.1f} ms, ${best['cost_per_million']:.4g} per million requests"
        + (" at an example instance price (set --instance-price)" if example else "")
        + (" for the memory alone, at --price-per-gb-hour" if summary["mode"] == "memory" else "")
        + serve_it(summary)
    )


def errors_said(steps: list[dict[str, Any]]) -> str:
    """How many errors, and the first one's answer: what to mend before tuning."""
    errors = sum(step["errors"] for step in steps)
    first = next((step["first_error"] for step in steps if step.get("first_error")), "")
    return f": {errors} errors, the first {first}" if errors and first else ""


def serve_it(summary: dict[str, Any]) -> str:
    """The recommendation as the server takes it; tune.json of older runs has none."""
    if "recommended_serve_args" not in summary:
        return ""
    command = shlex.join(["modelhost", "serve", *summary["recommended_serve_args"]])
    return f"\nServe it:\n  {command}\nor in modelhost.toml:\n{summary['recommended_toml']}"


def cold_starts(summary: dict[str, Any]) -> str:
    parts = ["queue", "download", "load", "infer"]
    rows = [
        [
            " ".join(f"{n}={v}" for n, v in p["settings"].items()) or "server",
            p["cold_start"]["model"],
            p["cold_start"]["status"],
            p["cold_start"]["cache"],
            p["cold_start"]["first_answer_ms"],
            *(p["cold_start"]["server_timing_ms"].get(part, float("nan")) for part in parts),
        ]
        for p in summary["points"]
    ]
    header = ["configuration", "model", "status", "cache", "first answer ms"]
    return html.table([*header, *(f"{part} ms" for part in parts)], rows)


def per_configuration(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """Three chart rows, one chart per configuration in each."""
    groups = by_configuration(summary)
    distributions, throughput, usage = [], [], []
    for label, rows in groups.items():
        users = [row["concurrency"] for row in rows]
        records = {
            f"{row['concurrency']} users": {n: row[f"{n}_ms"] for n in LATENCY} for row in rows
        }
        distributions.append(charts.percentiles(records, f"Latency distribution: {label}"))
        throughput.append(
            charts.twin(
                users,
                {"requests/s": [row["throughput_rps"] for row in rows]},
                {f"{q} ms": [row[f"{q}_ms"] for row in rows] for q in ("p50", "p95", "p99")},
                f"Throughput and latency: {label}",
                ("client concurrency", "requests/s", "latency (ms)"),
            )
        )
        usage.append(
            charts.twin(
                users,
                {"server CPU s": [row["server_cpu_s"] for row in rows]},
                {"peak PSS MiB": [row["server_peak_pss_mib"] for row in rows]},
                f"Server CPU and memory per step: {label}",
                ("client concurrency", "CPU seconds", "PSS (MiB)"),
            )
        )
    return [
        ("Latency distribution per configuration", html.grid(distributions)),
        ("Throughput and latency against concurrency", html.grid(throughput)),
        ("Server CPU and memory", html.grid(usage)),
    ]


def cost_chart(runs: dict[str, dict[str, Any]]) -> str:
    """Cost per million against p99 for every step, the frontier marked."""
    points = [
        (_number(row["p99_ms"]), _number(row["cost_per_million"]), name + label_of(summary, row))
        for name, summary in runs.items()
        for row in summary["steps"]
        if not row["errors"]  # a step with errors is no operating point
    ]
    finite = [(p[0], p[1]) for p in points]
    basis = {summary.get("cost_basis", "") for summary in runs.values()}
    return charts.frontier(
        points,
        efficient_frontier(finite),
        "Cost per million requests against p99 latency",
        f"$ per million requests ({', '.join(sorted(basis))})",
    )


def _number(value: float | None) -> float:
    return float("nan") if value is None else float(value)  # JSON's null


def tune_sections(summary: dict[str, Any], name: str = "") -> list[tuple[str, str]]:
    prefix = f"{name}: " if name else ""
    header, rows = table_of(summary, COLUMNS)
    return [
        (f"{prefix}Recommendation", html.paragraph(verdict(summary), "lines")),
        (f"{prefix}Cold start (first request for a model not loaded)", cold_starts(summary)),
        (f"{prefix}Every step", html.table(header, rows, summary["recommended_index"])),
        *((prefix + heading, body) for heading, body in per_configuration(summary)),
        (f"{prefix}Cost against latency", cost_chart({"": summary})),
    ]


def write_tune(out_dir: Path, summary: dict[str, Any]) -> dict[str, Path]:
    header, rows = table_of(summary, COLUMNS)
    paths = {
        "summary": files.write_json(out_dir / "tune.json", summary),
        "csv": files.write_csv(out_dir / "tune.csv", header, rows),
        "html": out_dir / "tune.html",
    }
    page = html.page(f"modelhost tune ({summary['mode']})", tune_sections(summary))
    paths["html"].write_text(page)
    return paths


def write_combined(out_dir: Path, runs: dict[str, dict[str, Any]]) -> Path:
    """combined.html: every run's verdict, all steps on one cost chart, then each run."""
    overview = html.table(
        ["run", "mode", "steps", "verdict"],
        [[name, s["mode"], len(s["steps"]), verdict(s)] for name, s in runs.items()],
    )
    labelled = {f"{Path(name).parent.name or name}: ": s for name, s in runs.items()}
    sections = [("Runs", overview), ("Cost against latency, every run", cost_chart(labelled))]
    for name, summary in runs.items():
        sections += tune_sections(summary, f"{Path(name).parent.name or name} ({summary['mode']})")
    path = out_dir / "combined.html"
    out_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(html.page("modelhost tune: combined report", sections))
    return path
