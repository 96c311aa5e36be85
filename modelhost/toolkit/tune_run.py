"""`tune` from options to a table: every point's ramp, the recommendation, the files."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.toolkit import tune
from modelhost.toolkit.report import charts, files, html
from modelhost.toolkit.tune import Settings, Step, TuneTarget

COLUMNS = [
    "concurrency",
    "throughput_rps",
    "p50_ms",
    "p99_ms",
    "errors",
    "throttled",
    "within_limit",
    "stop",
]


@dataclass(frozen=True)
class TuneOptions:
    mode: str  # grid | memory | concurrency
    grid: dict[str, list[str]]
    concurrencies: list[int]  # grid and memory modes: the ramp
    multipliers: list[float]  # concurrency mode: client users = max concurrency × multiplier
    p99_limit_ms: float
    min_gain: float
    price_per_gb_hour: float
    limit_flag: str = "max-concurrency"


def points(options: TuneOptions) -> list[Settings]:
    needed = {"memory": "memory-budget", "concurrency": options.limit_flag}.get(options.mode)
    if needed and needed not in options.grid:
        raise ValueError(f"--mode {options.mode} sweeps {needed}: give --grid {needed}=V1,V2,...")
    return tune.grid_points(options.grid)


def run_point(options: TuneOptions, settings: Settings) -> Callable[[Any], list[Step]]:
    def steps(measure: Callable[[int], dict[str, Any]]) -> list[Step]:
        if options.mode == "concurrency":
            limit = int(settings[options.limit_flag])
            users = [max(1, round(limit * m)) for m in options.multipliers]
            return list(tune.ramp(settings, users, measure, options.p99_limit_ms, None))
        return list(
            tune.ramp(
                settings, options.concurrencies, measure, options.p99_limit_ms, options.min_gain
            )
        )

    return steps


def run_tune(
    options: TuneOptions, target: TuneTarget, on_point: Callable[[list[Step]], None] = print
) -> dict[str, Any]:
    steps: list[Step] = []
    for settings in points(options):
        done = tune.measure_point(target, settings, run_point(options, settings))
        on_point(done)
        steps += done
    return tune_summary(options, steps)


def tune_summary(options: TuneOptions, steps: Sequence[Step]) -> dict[str, Any]:
    key = None
    if options.mode == "memory":

        def key(step: Step) -> float:
            return tune.cost_per_million(step, options.price_per_gb_hour)

    best = tune.recommend(steps, key)
    rows = [step.row() for step in steps]
    if options.mode == "memory":
        for row, step in zip(rows, steps, strict=True):
            row["cost_per_million"] = tune.cost_per_million(step, options.price_per_gb_hour)
    return {
        "mode": options.mode,
        "p99_limit_ms": options.p99_limit_ms,
        "settings": list(options.grid),
        "steps": rows,
        "recommended_index": best,
        "recommended": rows[best] if best is not None else None,
        # what `modelhost cost --from` reads: the recommendation's figures
        "throughput_rps": rows[best]["throughput_rps"] if best is not None else None,
        "latency_ms": {"p50": rows[best]["p50_ms"], "p99": rows[best]["p99_ms"]}
        if best is not None
        else None,
    }


def table_of(summary: dict[str, Any]) -> tuple[list[str], list[list[Any]]]:
    extra = ["cost_per_million"] if summary["mode"] == "memory" else []
    header = [*summary["settings"], *COLUMNS, *extra]
    return header, [[row.get(name, "") for name in header] for row in summary["steps"]]


def write_tune(out_dir: Path, summary: dict[str, Any]) -> dict[str, Path]:
    header, rows = table_of(summary)
    series: dict[str, list[float]] = {}
    xs: dict[str, list[float]] = {}
    for row in summary["steps"]:
        label = " ".join(f"{n}={row[n]}" for n in summary["settings"]) or "server"
        xs.setdefault(label, []).append(row["concurrency"])
        series.setdefault(label, []).append(row["throughput_rps"])
    chart = "".join(
        charts.lines(
            xs[label],
            {label: series[label]},
            f"Throughput against users: {label}",
            "client concurrency",
            "requests/s",
            markers=True,
        )
        for label in series
    )
    recommended = summary["recommended"]
    verdict = (
        (
            f"Recommended: {', '.join(f'{n}={recommended[n]}' for n in summary['settings'])} "
            f"at {recommended['concurrency']} users, {recommended['throughput_rps']:.1f} req/s, "
            f"p99 {recommended['p99_ms']:.1f} ms"
        )
        if recommended
        else (f"No point held p99 under {summary['p99_limit_ms']:g} ms without errors")
    )
    page = html.page(
        f"modelhost tune ({summary['mode']})",
        [
            ("Recommendation", html.paragraph(verdict)),
            ("Every step", html.table(header, rows, summary["recommended_index"])),
            ("Throughput by concurrency", chart),
        ],
    )
    paths = {
        "summary": files.write_json(out_dir / "tune.json", summary),
        "csv": files.write_csv(out_dir / "tune.csv", header, rows),
        "html": out_dir / "tune.html",
    }
    paths["html"].write_text(page)
    return paths
