"""`cost` from options to a table and files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from modelhost.toolkit.cost import EXAMPLE_PRICES, Instance, Serverless, cost_summary
from modelhost.toolkit.options import numbers, option
from modelhost.toolkit.report import files, html
from modelhost.toolkit.report.terminal import table

VOLUMES = "1e5,1e6,1e7,1e8,1e9"


def measured(path: Path | None) -> dict[str, float]:
    """Throughput, p50 latency and bytes per request from a bench summary.json or tune.json."""
    if path is None:
        return {}
    summary: dict[str, Any] = json.loads(Path(path).read_text())
    if summary.get("throughput_rps") is None:
        raise ValueError(f"{path} has no throughput inside the latency limit")
    found = {
        "throughput": float(summary["throughput_rps"]),
        "latency_ms": float(summary["latency_ms"]["p50"]),
    }
    return found


@dataclass(frozen=True, kw_only=True)
class CostOptions:
    from_summary: Path | None = option(
        None,
        "a bench summary.json or tune.json: throughput and latency from it",
        flag="--from",
        exists=True,
        show_default=False,
    )
    throughput: float | None = option(
        None, "requests/s one instance answers within the limit", show_default=False
    )
    latency_ms: float | None = option(
        None, "billed duration of a serverless request [default: --from's p50]", show_default=False
    )
    instance_price: float = option(
        EXAMPLE_PRICES["instance_per_hour"], "per hour (example: ml.m5.large)"
    )
    utilization: float = option(1.0, "share of the throughput the traffic may use")
    gb_second_price: float = option(EXAMPLE_PRICES["gb_second"])
    memory_gb: float = option(2.0, "serverless memory size")
    data_price: float = option(EXAMPLE_PRICES["data_per_gb"], "serverless, per GB in + out")
    bytes_per_request: float = option(0.0, "in + out [default: --from's, else 0]")
    request_price: float = option(
        EXAMPLE_PRICES["per_million_requests"], "serverless, per million requests"
    )
    volumes: str = option(VOLUMES, "monthly requests to compare")
    out: Path = option(Path("cost-out"), file_okay=False)


EXAMPLE_PRICE_FIELDS = ("instance_price", "gb_second_price", "data_price")


def cost_command(
    console: Console, options: CostOptions, example_prices: Sequence[str] = ()
) -> dict[str, Any]:
    """The table and files; `example_prices` names the prices left at their defaults."""
    from_summary, latency_ms, out = options.from_summary, options.latency_ms, options.out
    instance_price, utilization = options.instance_price, options.utilization
    gb_second_price, memory_gb = options.gb_second_price, options.memory_gb
    data_price, bytes_per_request = options.data_price, options.bytes_per_request
    request_price, volumes = options.request_price, numbers(options.volumes, float)
    throughput = options.throughput
    found = measured(from_summary)
    throughput = throughput or found.get("throughput")
    latency_ms = latency_ms or found.get("latency_ms")
    if not throughput or not latency_ms:
        raise ValueError("give --throughput and --latency-ms, or --from a bench/tune summary")
    instance = Instance(instance_price, throughput, utilization)
    serverless = Serverless(
        gb_second_price, memory_gb, latency_ms, data_price, bytes_per_request, request_price
    )
    source = (
        f"{', '.join(example_prices)} are examples: {EXAMPLE_PRICES['source']}"
        if example_prices
        else "prices given on the command line"
    )
    summary = cost_summary(instance, serverless, volumes, source)
    header = [
        "monthly requests",
        "instances",
        "instance $/month",
        "serverless $/month",
        "cheaper",
        "saving $/month",
    ]
    rows = [
        [f"{row['monthly_requests']:,.0f}", *list(row.values())[1:]] for row in summary["savings"]
    ]
    console.print(
        f"instance ${instance.per_million():.4f} per million requests; serverless "
        f"${serverless.per_million():.4f}; break-even "
        f"{summary['break_even_monthly_requests']:,.0f} requests a month"
    )
    console.print(table("savings", header, rows))
    console.print(f"[yellow]{source}[/]")
    page = html.page(
        "modelhost cost",
        [
            (
                "Per million requests",
                html.table(
                    ["instance", "serverless", "break-even / month"],
                    [
                        [
                            instance.per_million(),
                            serverless.per_million(),
                            summary["break_even_monthly_requests"],
                        ]
                    ],
                ),
            ),
            ("Savings", html.table(header, rows)),
            ("Prices", html.paragraph(source, "note")),
        ],
    )
    files.write_json(out / "cost.json", summary)
    (out / "cost.html").write_text(page)
    console.print(f"wrote {out / 'cost.json'}, {out / 'cost.html'}")
    return summary
