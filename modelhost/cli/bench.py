"""`modelhost bench URL`: load-test an endpoint; write summary.json, requests.csv, report.html."""

from __future__ import annotations

import click

from modelhost.toolkit.options import click_options
from modelhost.toolkit.run import BenchOptions


@click.command(context_settings={"max_content_width": 100})
@click.argument("url", required=False, default="")
@click_options(BenchOptions)
def bench(**values: object) -> None:
    """Load-test URL: the endpoint root of a multi-model server (with --models), or the full
    invocation URL of a single model; or, with --endpoint-name, a SageMaker endpoint (to measure
    it before and after moving to modelhost with the same tool).

    Closed loop with --concurrency, open loop with --rate (latency then counts from each
    request's due time, so a slow server cannot hide its stalls). --requests N measures N
    requests instead of a duration."""
    from modelhost.toolkit.run import bench_command

    try:
        bench_command(BenchOptions(**values))  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
