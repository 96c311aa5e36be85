"""`modelhost bench URL`: load-test an endpoint; write summary.json, requests.csv, report.html."""

from __future__ import annotations

import os
from pathlib import Path

import click

PROCESSES_DEFAULT = max(1, min(4, len(os.sched_getaffinity(0)) // 2))


@click.command(context_settings={"max_content_width": 100})
@click.argument("url")
@click.option(
    "--payloads",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help='JSON lines: SageMaker {"Body","ContentType"} or raw JSON bodies [default: one iris row]',
)
@click.option("--models", default="", help="comma-separated model names, or @FILE (one a line)")
@click.option(
    "--popularity", type=click.Choice(["uniform", "zipf"]), default="uniform", show_default=True
)
@click.option("--zipf-s", type=float, default=1.0, show_default=True, help="Zipf exponent")
@click.option(
    "--model-in",
    "model_in",
    type=click.Choice(["header", "path"]),
    default="header",
    show_default=True,
    help="X-Amzn-SageMaker-Target-Model on /invocations, or /models/{m}/invoke",
)
@click.option("--concurrency", "-c", type=int, default=0, help="closed loop: N users")
@click.option("--rate", "-r", type=float, default=0.0, help="open loop: requests per second")
@click.option(
    "--arrivals",
    type=click.Choice(["constant", "poisson"]),
    default="poisson",
    show_default=True,
    help="open loop schedule",
)
@click.option("--duration", type=float, default=10.0, show_default=True, help="seconds measured")
@click.option(
    "--warmup",
    type=float,
    default=2.0,
    show_default=True,
    help="seconds sent first and left out of every figure",
)
@click.option(
    "--processes",
    type=int,
    default=PROCESSES_DEFAULT,
    show_default=True,
    help="load-generator processes",
)
@click.option(
    "--max-in-flight",
    type=int,
    default=10_000,
    show_default=True,
    help="open loop: most requests outstanding per process",
)
@click.option("--timeout", type=float, default=30.0, show_default=True, help="seconds a request")
@click.option(
    "--client", type=click.Choice(["aiohttp", "httpx"]), default="aiohttp", show_default=True
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-out"),
    show_default=True,
    help="folder for summary.json, requests.csv, report.html",
)
@click.option("--quiet", is_flag=True, help="no progress bar")
def bench(
    url: str,
    payloads: Path | None,
    models: str,
    popularity: str,
    zipf_s: float,
    model_in: str,
    concurrency: int,
    rate: float,
    arrivals: str,
    duration: float,
    warmup: float,
    processes: int,
    max_in_flight: int,
    timeout: float,
    client: str,
    seed: int,
    out: Path,
    quiet: bool,
) -> None:
    """Load-test URL: the endpoint root of a multi-model server (with --models), or the full
    invocation URL of a single model.

    Closed loop with --concurrency, open loop with --rate (latency then counts from each
    request's due time, so a slow server cannot hide its stalls)."""
    from modelhost.toolkit.run import BenchOptions, bench_command

    options = BenchOptions(
        url,
        payloads,
        models,
        popularity,
        zipf_s,
        model_in == "path",
        concurrency,
        rate,
        arrivals == "poisson",
        duration,
        warmup,
        processes,
        max_in_flight,
        timeout,
        client,
        seed,
        out,
        quiet,
    )
    try:
        bench_command(options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
