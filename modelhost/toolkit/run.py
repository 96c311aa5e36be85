"""`bench` from options to files: build the plan, run it under a progress bar, show and write."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from modelhost.toolkit.bench import BenchRun, bench_summary, run_bench
from modelhost.toolkit.bench import Progress as RunProgress
from modelhost.toolkit.loadgen import ProcessPlan
from modelhost.toolkit.payloads import Payload, read_payloads
from modelhost.toolkit.traffic import Popularity, Target, read_models

IRIS_ROW = b"[5.1, 3.5, 1.4, 0.2]"


@dataclass(frozen=True)
class BenchOptions:
    url: str
    payloads: Path | None
    models: str
    popularity: str
    zipf_s: float
    in_path: bool
    concurrency: int
    rate_rps: float
    poisson: bool
    duration_s: float
    warmup_s: float
    processes: int
    max_in_flight: int
    timeout_s: float
    client: str
    seed: int
    out: Path
    quiet: bool


def plan_of(options: BenchOptions) -> ProcessPlan:
    if bool(options.concurrency) == bool(options.rate_rps):
        raise ValueError("give one of --concurrency N (closed loop) or --rate R (open loop)")
    if options.duration_s <= 0:
        raise ValueError(f"--duration must be above 0 s, not {options.duration_s}")
    names = read_models(options.models) if options.models else []
    popularity = (
        Popularity.zipf(names, options.zipf_s)
        if options.popularity == "zipf"
        else Popularity.uniform(names)
    )
    payloads = read_payloads(options.payloads) if options.payloads else [Payload(IRIS_ROW)]
    return ProcessPlan(
        Target(options.url, options.in_path),
        popularity,
        tuple(payloads),
        options.duration_s,
        options.warmup_s,
        options.concurrency,
        options.rate_rps,
        options.poisson,
        max_in_flight=options.max_in_flight,
        timeout_s=options.timeout_s,
        client=options.client,
        seed=options.seed,
    )


def run_with_progress(
    plan: ProcessPlan, processes: int, console: Console, quiet: bool = False
) -> BenchRun:
    """The run, with a progress bar over its time on `console` unless `quiet`."""
    if quiet:
        return run_bench(plan, processes)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[done]} answered, {task.fields[errors]} errors"),
    )
    with Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("bench", total=plan.end_s, done=0, errors=0)

        def update(p: RunProgress) -> None:
            bar.update(task, completed=min(p.elapsed_s, p.total_s), done=p.done, errors=p.errors)

        return run_bench(plan, processes, update)


def bench_command(options: BenchOptions, console: Console | None = None) -> dict[str, Any]:
    from modelhost.toolkit.report.bench import write_bench
    from modelhost.toolkit.report.terminal import bench_tables, show

    console = console or Console()
    plan = plan_of(options)
    run = run_with_progress(plan, options.processes, console, options.quiet)
    summary = bench_summary(plan, run)
    show(console, bench_tables(summary), summary["generator"]["warnings"])
    paths = write_bench(options.out, run, summary)
    console.print("wrote " + ", ".join(str(path) for path in paths.values()))
    return summary


def read_summary(path: Path) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads(Path(path).read_text())
    return summary
