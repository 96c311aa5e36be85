"""`modelhost tune`: find the best settings from a grid."""

from __future__ import annotations

import click

from modelhost.toolkit.options import click_options
from modelhost.toolkit.tune import TuneOptions


@click.command(context_settings={"max_content_width": 100})
@click_options(TuneOptions)
def tune(**values: object) -> None:
    """Serve each point of the --grid, ramp concurrency against it, and recommend one.

    The ramp stops where p99 passes the limit or throughput stops growing; the point with the
    most throughput inside the limit wins (memory mode: the cheapest)."""
    from modelhost.toolkit.tune import combine_command, tune_command

    options = TuneOptions(**values)  # type: ignore[arg-type]
    try:
        if options.combine:
            combine_command(options)
        else:
            tune_command(options)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
