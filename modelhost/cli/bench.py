"""`modelhost bench URL`: load-test an endpoint."""

from __future__ import annotations

import click

from modelhost.toolkit.options import click_options
from modelhost.toolkit.run import BenchOptions


@click.command(context_settings={"max_content_width": 100})
@click.argument("url", required=False, default="")
@click_options(BenchOptions)
def bench(**values: object) -> None:
    """Load-test URL: a multi-model root (--models), one model's URL, or a SageMaker endpoint.

    Closed loop with --concurrency, open loop with --rate (latency counts from each request's
    due time, so a slow server cannot hide its stalls)."""
    from modelhost.toolkit.run import bench_command

    try:
        bench_command(BenchOptions(**values))  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
