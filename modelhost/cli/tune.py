"""`modelhost tune`: serve each point of a settings grid, ramp users against it, recommend one."""

from __future__ import annotations

from pathlib import Path

import click


def _numbers(text: str, kind: type[float] | type[int]) -> list[float] | list[int]:
    return [kind(part) for part in text.split(",") if part.strip()]


@click.command(context_settings={"max_content_width": 100})
@click.option("--model-store", required=True, help="the store `modelhost serve` serves")
@click.option("--models", default="", help="models to invoke: comma-separated or @FILE")
@click.option(
    "--payloads",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON lines of bodies [default: one iris row]",
)
@click.option(
    "--popularity", type=click.Choice(["uniform", "zipf"]), default="uniform", show_default=True
)
@click.option(
    "--mode",
    type=click.Choice(["grid", "memory", "concurrency"]),
    default="grid",
    show_default=True,
)
@click.option(
    "--grid",
    "grid_items",
    multiple=True,
    help="a `modelhost serve` flag and its values, e.g. workers=1,2 (repeatable)",
)
@click.option(
    "--concurrency",
    "ramp",
    default="1,2,4,8,16,32",
    show_default=True,
    help="the users ramp (grid and memory modes)",
)
@click.option(
    "--multipliers",
    default="0.5,1,2,4",
    show_default=True,
    help="concurrency mode: users = max concurrency × each",
)
@click.option(
    "--limit-flag",
    default="max-concurrency",
    show_default=True,
    help="concurrency mode: the server flag swept",
)
@click.option("--p99-limit-ms", type=float, default=100.0, show_default=True)
@click.option(
    "--min-gain",
    type=float,
    default=0.05,
    show_default=True,
    help="a step must add this share of throughput or the ramp stops",
)
@click.option(
    "--price-per-gb-hour",
    type=float,
    default=0.0,
    help="memory mode: price of a GiB of memory per hour, for the cost column",
)
@click.option("--duration", type=float, default=5.0, show_default=True, help="seconds per step")
@click.option("--warmup", type=float, default=1.0, show_default=True)
@click.option(
    "--processes", type=int, default=1, show_default=True, help="load-generator processes"
)
@click.option(
    "--serve-arg",
    "serve_args",
    multiple=True,
    help="one more argument for every `modelhost serve` (repeatable)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("tune-out"),
    show_default=True,
)
def tune(
    model_store: str,
    models: str,
    payloads: Path | None,
    popularity: str,
    mode: str,
    grid_items: tuple[str, ...],
    ramp: str,
    multipliers: str,
    limit_flag: str,
    p99_limit_ms: float,
    min_gain: float,
    price_per_gb_hour: float,
    duration: float,
    warmup: float,
    processes: int,
    serve_args: tuple[str, ...],
    out: Path,
) -> None:
    """Start `modelhost serve` for each point of the --grid, ramp client concurrency until p99
    passes the limit or throughput stops growing, and recommend the point with the most
    throughput inside the limit (memory mode: the cheapest)."""
    from rich.console import Console

    from modelhost.toolkit.report.terminal import table
    from modelhost.toolkit.run import BenchOptions, plan_of
    from modelhost.toolkit.tune import TuneTarget
    from modelhost.toolkit.tune_run import TuneOptions, run_tune, table_of, write_tune

    console = Console()
    try:
        options = TuneOptions(
            mode,
            _grid(grid_items),
            list(map(int, _numbers(ramp, int))),
            list(_numbers(multipliers, float)),
            p99_limit_ms,
            min_gain,
            price_per_gb_hour,
            limit_flag,
        )
        bench = BenchOptions(
            "http://127.0.0.1",
            payloads,
            models,
            popularity,
            1.0,
            False,
            1,
            0,
            False,
            duration,
            warmup,
            processes,
            10_000,
            30.0,
            "aiohttp",
            0,
            out,
            True,
        )
        target = TuneTarget(
            ["--model-store", model_store, *serve_args], plan_of(bench), processes, out / "logs"
        )
        summary = run_tune(
            options,
            target,
            lambda steps: console.print(
                f"{steps[0].settings}: "
                + ", ".join(
                    f"{s.concurrency} users {s.throughput_rps:.0f}/s p99 {s.p99_ms:.0f} ms"
                    for s in steps
                )
            ),
        )
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    header, rows = table_of(summary)
    console.print(table(f"tune ({mode})", header, rows, summary["recommended_index"]))
    console.print(f"recommended: {summary['recommended']}")
    console.print("wrote " + ", ".join(str(p) for p in write_tune(out, summary).values()))


def _grid(items: tuple[str, ...]) -> dict[str, list[str]]:
    from modelhost.toolkit.tune import parse_grid

    return parse_grid(items)
