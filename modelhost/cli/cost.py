"""`modelhost cost`: cost per million requests on an instance and serverless."""

from __future__ import annotations

import click
from click.core import ParameterSource

from modelhost.toolkit.cost import EXAMPLE_PRICE_FIELDS, CostOptions
from modelhost.toolkit.options import click_options


@click.command(context_settings={"max_content_width": 100})
@click_options(CostOptions)
@click.pass_context
def cost(ctx: click.Context, /, **values: object) -> None:
    """Cost per million requests on an instance and serverless, and the break-even volume.

    Default prices are EXAMPLES (AWS SageMaker, us-east-1, read in 2024)."""
    from modelhost.toolkit.cost import cost_command
    from modelhost.toolkit.report.terminal import console_for

    defaults = [
        name
        for name in (*EXAMPLE_PRICE_FIELDS, "memory_gb")
        if ctx.get_parameter_source(name) is ParameterSource.DEFAULT
    ]
    try:
        cost_command(console_for(), CostOptions(**values), defaults)  # type: ignore[arg-type]
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
