"""`modelhost tune`: serve each point of a settings grid, ramp users against it, recommend one."""

from __future__ import annotations

import click

from modelhost.toolkit.options import click_options
from modelhost.toolkit.tune_run import TuneOptions


@click.command(context_settings={"max_content_width": 100})
@click_options(TuneOptions)
def tune(**values: object) -> None:
    """Start `modelhost serve` for each point of the --grid, time its first request for a model
    it has not loaded (the cold start), ramp client concurrency until p99 passes the limit or
    throughput stops growing, and recommend the point with the most throughput inside the limit
    (memory mode: the cheapest). Each step keeps the full latency record, errors by status and
    the server's CPU seconds and peak PSS; tune.html charts them per configuration."""
    from modelhost.toolkit.tune_run import combine_command, tune_command

    options = TuneOptions(**values)  # type: ignore[arg-type]
    try:
        if options.combine:
            combine_command(options)
        else:
            tune_command(options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
