"""`modelhost cost`: cost per million requests on an instance and serverless; the break-even."""

from __future__ import annotations

from pathlib import Path

import click

from modelhost.toolkit.cost import EXAMPLE_PRICES

VOLUMES = "1e5,1e6,1e7,1e8,1e9"


@click.command(context_settings={"max_content_width": 100})
@click.option(
    "--from",
    "from_summary",
    type=click.Path(exists=True, path_type=Path),
    help="a bench summary.json or tune.json: throughput and latency from it",
)
@click.option("--throughput", type=float, help="requests/s one instance answers within the limit")
@click.option(
    "--latency-ms",
    type=float,
    help="billed duration of a serverless request [default: --from's p50]",
)
@click.option(
    "--instance-price",
    type=float,
    default=EXAMPLE_PRICES["instance_per_hour"],
    show_default=True,
    help="per hour (example: ml.m5.large)",
)
@click.option(
    "--utilization",
    type=float,
    default=1.0,
    show_default=True,
    help="share of the throughput the traffic may use",
)
@click.option(
    "--gb-second-price", type=float, default=EXAMPLE_PRICES["gb_second"], show_default=True
)
@click.option(
    "--memory-gb", type=float, default=2.0, show_default=True, help="serverless memory size"
)
@click.option(
    "--data-price",
    type=float,
    default=EXAMPLE_PRICES["data_per_gb"],
    show_default=True,
    help="serverless, per GB in + out",
)
@click.option(
    "--bytes-per-request",
    type=float,
    default=0.0,
    show_default=True,
    help="in + out [default: --from's, else 0]",
)
@click.option(
    "--request-price",
    type=float,
    default=EXAMPLE_PRICES["per_million_requests"],
    show_default=True,
    help="serverless, per million requests",
)
@click.option("--volumes", default=VOLUMES, show_default=True, help="monthly requests to compare")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("cost-out"),
    show_default=True,
)
@click.pass_context
def cost(
    ctx: click.Context,
    from_summary: Path | None,
    throughput: float | None,
    latency_ms: float | None,
    instance_price: float,
    utilization: float,
    gb_second_price: float,
    memory_gb: float,
    data_price: float,
    bytes_per_request: float,
    request_price: float,
    volumes: str,
    out: Path,
) -> None:
    """Cost per million requests on an always-on instance (price per hour ÷ measured throughput)
    and serverless (GB-seconds × memory × latency + data), the break-even monthly volume, and a
    savings table. Default prices are EXAMPLES (AWS SageMaker, us-east-1, read in 2024)."""
    from rich.console import Console

    from modelhost.toolkit.cost_run import cost_command

    defaults = [
        name
        for name in ("instance_price", "gb_second_price", "data_price")
        if ctx.get_parameter_source(name) is click.core.ParameterSource.DEFAULT
    ]
    try:
        volume_list = [float(v) for v in volumes.split(",")]
        cost_command(Console(), **{**ctx.params, "volumes": volume_list}, example_prices=defaults)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
