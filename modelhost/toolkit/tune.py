"""`tune`: start `modelhost serve` at each point of a grid of settings, ramp the client concurrency
against it, and recommend the point with the most throughput inside the p99 limit.

A ramp stops at its knee: when p99 passes the limit, or when throughput grew by less than
`min_gain` over the best step before it (more users only queue). Modes: `grid` (any settings),
`memory` (memory budgets, with a cost per million requests each and the cheapest that holds the
limit recommended) and `concurrency` (the server's max concurrency × client multipliers, counting
throttled 429 answers; every step is run).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.toolkit.bench import BenchRun, bench_summary, run_bench
from modelhost.toolkit.loadgen import ProcessPlan
from modelhost.units import parse_size

Settings = dict[str, str]


@dataclass(frozen=True)
class Step:
    settings: Settings
    concurrency: int
    throughput_rps: float
    p50_ms: float
    p99_ms: float
    errors: int
    throttled: int  # 429 answers
    within_limit: bool
    stop: str = ""  # why the ramp ended after this step, if it did

    def row(self) -> dict[str, Any]:
        return {**self.settings, **{k: v for k, v in vars(self).items() if k != "settings"}}


def grid_points(grid: dict[str, list[str]]) -> list[Settings]:
    """Every combination of the settings' values, in the order given."""
    names = list(grid)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*grid.values())]


def parse_grid(items: Sequence[str]) -> dict[str, list[str]]:
    """`workers=1,2` items → {"workers": ["1", "2"]}."""
    grid = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise ValueError(f"--grid {item!r}: write NAME=V1,V2 (a `modelhost serve` flag name)")
        grid[name.strip().lstrip("-").replace("_", "-")] = [v.strip() for v in values.split(",")]
    return grid


def serve_flags(settings: Settings) -> list[str]:
    return [arg for name, value in settings.items() for arg in (f"--{name}", value)]


def step_of(
    settings: Settings, concurrency: int, summary: dict[str, Any], p99_limit_ms: float
) -> Step:
    requests = summary["requests"]
    p99 = summary["latency_ms"]["p99"]
    errors = requests["measured"] - requests["ok"]
    throttled = sum(n for kind, n in requests["errors"].items() if "429" in kind)
    within = errors == 0 and not math.isnan(p99) and p99 <= p99_limit_ms
    return Step(
        settings,
        concurrency,
        summary["throughput_rps"],
        summary["latency_ms"]["p50"],
        p99,
        errors,
        throttled,
        within,
    )


def ramp(
    settings: Settings,
    concurrencies: Sequence[int],
    measure: Callable[[int], dict[str, Any]],
    p99_limit_ms: float,
    min_gain: float | None = 0.05,
) -> Iterator[Step]:
    """Steps of rising concurrency until the knee (or all of them when `min_gain` is None)."""
    best = 0.0
    for index, concurrency in enumerate(concurrencies):
        step = step_of(settings, concurrency, measure(concurrency), p99_limit_ms)
        last = index == len(concurrencies) - 1
        if min_gain is not None and not last:
            if not step.within_limit:
                step = dataclasses.replace(step, stop=f"p99 over {p99_limit_ms:g} ms or errors")
            elif best and step.throughput_rps < best * (1 + min_gain):
                step = dataclasses.replace(step, stop=f"throughput grew < {min_gain:.0%}")
        yield step
        if step.stop:
            return
        best = max(best, step.throughput_rps)


def recommend(steps: Sequence[Step], key: Callable[[Step], float] | None = None) -> int | None:
    """Index of the step with the most throughput (or the least `key`) inside the limit."""
    inside = [i for i, step in enumerate(steps) if step.within_limit]
    if not inside:
        return None
    if key is None:
        return max(inside, key=lambda i: steps[i].throughput_rps)
    return min(inside, key=lambda i: key(steps[i]))


def cost_per_million(step: Step, price_per_gb_hour: float) -> float:
    """Memory mode: the budget's price per hour over the requests it answers in an hour."""
    gib = parse_size(step.settings["memory-budget"]) / 2**30
    if step.throughput_rps <= 0:
        return math.inf
    return price_per_gb_hour * gib / (step.throughput_rps * 3600) * 1e6


@dataclass(frozen=True)
class TuneTarget:
    """How each point is served and loaded: `serve_args` go to every `modelhost serve`; `plan`
    is the bench plan whose target URL and concurrency each step replaces."""

    serve_args: list[str]
    plan: ProcessPlan
    processes: int = 1
    log_dir: Path | None = None


def measure_point(
    target: TuneTarget,
    settings: Settings,
    run_steps: Callable[[Callable[[int], dict[str, Any]]], list[Step]],
) -> list[Step]:
    """Serve with `settings` on a free loopback port, run the steps against it, stop the server."""
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="modelhost-tune-") as folder:
        work = Path(folder)
        args = [*target.serve_args, "--cache-dir", str(work / "cache"), *serve_flags(settings)]
        with testing.RunningServer(args, target.log_dir or work) as server:

            def measure(concurrency: int) -> dict[str, Any]:
                plan = dataclasses.replace(
                    target.plan,
                    concurrency=concurrency,
                    rate_rps=0.0,
                    target=dataclasses.replace(target.plan.target, url=server.url),
                )
                run: BenchRun = run_bench(plan, target.processes)
                return bench_summary(plan, run)

            return run_steps(measure)
