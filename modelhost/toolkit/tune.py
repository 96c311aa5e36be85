"""`tune`: serve each point of a settings grid, ramp concurrency, recommend the best point;
from options to files. The ramp itself is in ramp.py."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.toolkit.cost import EXAMPLE_PRICES
from modelhost.toolkit.options import numbers, option
from modelhost.toolkit.ramp import (
    Point,
    Settings,
    Step,
    TuneTarget,
    measure_point,
    ramp,
    recommend,
    serve_flags,
)
from modelhost.toolkit.run import BenchOptions, plan_of
from modelhost.units import parse_size

# searched in grid mode where the server is given devices, as the SageMaker guide tunes instance
# counts and batch sizes on a GPU by hand; a grid naming one keeps its own values
DEVICE_KNOBS = {"workers-per-device": ["1", "2"], "device-batch-size": ["8", "32"]}
DEVICE_FLAGS = ("devices", "fake-devices")


@dataclass(frozen=True, kw_only=True)
class TuneOptions:
    model_store: str = option("", "the store `modelhost serve` serves (required)")
    models: str = option("", "models to invoke: comma-separated or @FILE")
    payloads: Path | None = option(
        None, "as bench's --payloads [default: one iris row]", exists=True, show_default=False
    )
    popularity: str = option("uniform", choices=("uniform", "zipf"))
    mode: str = option("grid", choices=("grid", "memory", "concurrency"))
    grid: tuple[str, ...] = option(
        (), "a `modelhost serve` flag and its values, e.g. workers=1,2 (repeatable)"
    )
    concurrency: str = option("1,2,4,8,16,32", "the users ramp (grid and memory modes)")
    multipliers: str = option("0.5,1,2,4", "concurrency mode: users = max concurrency × each")
    limit_flag: str = option("max-concurrency", "concurrency mode: the server flag swept")
    p99_limit_ms: float = option(100.0, minimum=0, above=True)
    min_gain: float = option(
        0.05, "a step must add this share of throughput or the ramp stops", minimum=0
    )
    price_per_gb_hour: float = option(
        0.0, "memory mode: price of a GiB of memory per hour, for the cost per million", minimum=0
    )
    instance_price: float = option(
        EXAMPLE_PRICES["instance_per_hour"],
        "grid and concurrency modes: price per hour of the instance (an EXAMPLE default, not a "
        "quote), for the cost per million",
        minimum=0,
    )
    duration_s: float = option(5.0, "seconds per step", flag="--duration", minimum=0)
    requests: int = option(
        0, "measure this many requests per step instead of a --duration", minimum=0
    )
    warmup_s: float = option(
        1.0, "seconds per step left out of the figures", flag="--warmup", minimum=0
    )
    processes: int = option(1, "load-generator processes", minimum=1)
    serve_args: tuple[str, ...] = option(
        (), "one more argument for every `modelhost serve` (repeatable)", flag="--serve-arg"
    )
    combine: tuple[Path, ...] = option(
        (),
        "a tune.json of an earlier run (repeatable): write one combined report of them "
        "(e.g. stability, concurrency and cost runs) instead of running",
        exists=True,
        dir_okay=False,
    )
    out: Path = option(Path("tune-out"), file_okay=False)

    def changed(self, flag: str) -> bool:
        name = flag.removeprefix("--").replace("-", "_")
        default = next(f.default for f in dataclasses.fields(self) if f.name == name)
        return bool(getattr(self, name) != default)

    @property
    def grid_values(self) -> dict[str, list[str]]:
        return parse_grid(self.grid)

    def target(self) -> TuneTarget:
        if not self.model_store:
            raise ValueError("give --model-store: the store each `modelhost serve` serves")
        unused = [f for f, used in MODE_FLAGS.items() if self.changed(f) and not used(self)]
        if unused:
            raise ValueError(f"{', '.join(unused)}: not used with --mode {self.mode}")
        numbers(self.concurrency, int, "--concurrency")  # refused before any server starts
        numbers(self.multipliers, float, "--multipliers")
        if self.mode == "memory" and self.price_per_gb_hour <= 0:
            raise ValueError(
                "--mode memory recommends the budget with the lowest cost per million: give "
                "--price-per-gb-hour, the price of a GiB of memory an hour (e.g. 0.0125)"
            )
        bench = BenchOptions(
            url="http://127.0.0.1",  # each point's server replaces it
            payloads=self.payloads,
            models=self.models,
            popularity=self.popularity,
            concurrency=1,  # each step replaces it
            duration_s=self.duration_s,
            requests=self.requests,
            warmup_s=self.warmup_s,
            processes=self.processes,
            out=self.out,
            quiet=True,
        )
        plan = plan_of(bench)
        if not plan.popularity.models:  # bench's URL names a model; tune's servers have none
            raise ValueError(
                "give --models (comma-separated or @FILE), or --payloads whose lines name a "
                "TargetModel: tune invokes them on each server it starts"
            )
        serve_args = ["--model-store", self.model_store, *self.serve_args]
        return TuneTarget(serve_args, plan, self.processes, self.out / "logs")


# the flags one mode alone reads: given to another, they would change nothing
MODE_FLAGS: dict[str, Callable[[TuneOptions], bool]] = {
    "--price-per-gb-hour": lambda o: o.mode == "memory",
    "--multipliers": lambda o: o.mode == "concurrency",
    "--limit-flag": lambda o: o.mode == "concurrency",
    "--concurrency": lambda o: o.mode != "concurrency",
    "--instance-price": lambda o: o.mode != "memory",
}


def grid_points(grid: dict[str, list[str]]) -> list[Settings]:
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


def points(options: TuneOptions) -> list[Settings]:
    needed = {"memory": "memory-budget", "concurrency": options.limit_flag}.get(options.mode)
    if needed and needed not in options.grid_values:
        raise ValueError(f"--mode {options.mode} sweeps {needed}: give --grid {needed}=V1,V2,...")
    grid = options.grid_values
    if options.mode == "grid" and has_devices(options.serve_args, grid):
        grid = {**DEVICE_KNOBS, **grid}
    return grid_points(grid)


def has_devices(serve_args: Sequence[str], grid: dict[str, list[str]]) -> bool:
    """Whether the server is given devices: `--devices` other than none, or fake ones."""
    given = {flag: values for flag, values in grid.items() if flag in DEVICE_FLAGS}
    for index, arg in enumerate(serve_args):
        flag, sep, value = arg.lstrip("-").partition("=")
        if flag in DEVICE_FLAGS:
            following = serve_args[index + 1] if index + 1 < len(serve_args) else ""
            given[flag] = [value if sep else following]
    return any(value not in ("", "none") for values in given.values() for value in values)


def run_point(options: TuneOptions, settings: Settings) -> Callable[[Any], list[Step]]:
    def steps(measure: Callable[[int], dict[str, Any]]) -> list[Step]:
        if options.mode == "concurrency":
            limit = int(settings[options.limit_flag])
            users = [
                max(1, round(limit * m))
                for m in numbers(options.multipliers, float, "--multipliers")
            ]
            return list(ramp(settings, users, measure, options.p99_limit_ms, None))
        rising = numbers(options.concurrency, int, "--concurrency")
        return list(ramp(settings, rising, measure, options.p99_limit_ms, options.min_gain))

    return steps


def run_tune(
    options: TuneOptions, target: TuneTarget, on_point: Callable[[Point], None] = print
) -> dict[str, Any]:
    done: list[Point] = []
    for settings in points(options):
        point = measure_point(target, settings, run_point(options, settings))
        on_point(point)
        done.append(point)
    return tune_summary(options, done)


def cost_per_million(options: TuneOptions, step: Step) -> float:
    """Per million answered, at the budget's price in memory mode, else the instance's."""
    if step.throughput_rps <= 0:
        return math.inf
    if options.mode == "memory":
        gib = parse_size(step.settings["memory-budget"]) / 2**30
        per_hour = options.price_per_gb_hour * gib
    else:
        per_hour = options.instance_price
    return per_hour / (step.throughput_rps * 3600) * 1e6


def example_price(options: TuneOptions) -> bool:
    return (
        options.mode != "memory" and options.instance_price == EXAMPLE_PRICES["instance_per_hour"]
    )


def cost_basis(options: TuneOptions) -> str:
    if options.mode == "memory":
        return "memory GiB-hour"
    return "instance hour, an example price" if example_price(options) else "instance hour"


def tune_summary(options: TuneOptions, done: Sequence[Point]) -> dict[str, Any]:
    steps = [step for point in done for step in point.steps]
    costs = [cost_per_million(options, step) for step in steps]
    key = None
    if options.mode == "memory":

        def key(step: Step) -> float:
            return cost_per_million(options, step)

    best = recommend(steps, key)
    rows = [{**step.row(), "cost_per_million": c} for step, c in zip(steps, costs, strict=True)]
    return {
        "mode": options.mode,
        "p99_limit_ms": options.p99_limit_ms,
        "settings": list(done[0].settings) if done else list(options.grid_values),
        "cost_basis": cost_basis(options),
        "example_price": example_price(options),
        "points": [{"settings": p.settings, "cold_start": p.cold_start} for p in done],
        "steps": rows,
        "recommended_index": best,
        "recommended": rows[best] if best is not None else None,
        **(recommended_forms(options, steps[best].settings) if best is not None else {}),
        # what `modelhost cost --from` reads: the recommendation's figures
        "throughput_rps": rows[best]["throughput_rps"] if best is not None else None,
        "latency_ms": steps[best].latency_ms if best is not None else None,
        "bytes_per_request": steps[best].bytes_per_request if best is not None else None,
    }


def recommended_forms(options: TuneOptions, settings: Settings) -> dict[str, Any]:
    """The recommended point as `modelhost serve` arguments and as modelhost.toml lines."""
    args = ["--model-store", options.model_store, *options.serve_args, *serve_flags(settings)]
    values = {**flag_values(args), **settings}
    toml = "".join(f"{name.replace('-', '_')} = {json.dumps(v)}\n" for name, v in values.items())
    return {"recommended_serve_args": args, "recommended_toml": toml}


def flag_values(args: Sequence[str]) -> dict[str, str]:
    """`--name value`, `--name=value` and `--[no-]switch` as {name: value}."""
    values = {}
    for index, arg in enumerate(args):
        if not arg.startswith("--"):
            continue
        name, sep, value = arg[2:].partition("=")
        following = args[index + 1] if index + 1 < len(args) else "--"
        if sep:
            values[name] = value
        elif not following.startswith("--"):
            values[name] = following
        else:  # a switch: TOML's key is the setting's, without no-
            values[name.removeprefix("no-")] = "false" if name.startswith("no-") else "true"
    return values


def describe(point: Point) -> str:
    cold = point.cold_start
    steps = ", ".join(
        f"{s.concurrency} users {s.throughput_rps:.0f}/s p95 {s.latency_ms['p95']:.0f} ms "
        f"p99 {s.p99_ms:.0f} ms"
        for s in point.steps
    )
    settings = " ".join(f"{n}={v}" for n, v in point.settings.items()) or "server"
    said = cold["cache"] if cold["status"] < 400 else f"HTTP {cold['status']}"
    return f"{settings}: cold start {cold['first_answer_ms']:.0f} ms ({said}); {steps}"


def tune_command(options: TuneOptions) -> dict[str, Any]:
    from modelhost.toolkit.report.terminal import console_for, table
    from modelhost.toolkit.report.tune import table_of, verdict, write_tune

    console = console_for()
    summary = run_tune(options, options.target(), lambda p: console.print(describe(p)))
    header, rows = table_of(summary)
    console.print(table(f"tune ({options.mode})", header, rows, summary["recommended_index"]))
    console.print(verdict(summary))
    console.print("wrote " + ", ".join(str(p) for p in write_tune(options.out, summary).values()))
    return summary


def combine_command(options: TuneOptions) -> Path:
    """One report of several earlier runs' tune.json."""
    import json

    from modelhost.toolkit.report.tune import write_combined

    runs = {str(path): json.loads(Path(path).read_text()) for path in options.combine}
    for name, summary in runs.items():
        if "steps" not in summary or "points" not in summary:
            raise ValueError(f"{name} is not a tune.json of this version (no steps or points)")
    path = write_combined(options.out, runs)
    print(f"wrote {path}")
    return path
