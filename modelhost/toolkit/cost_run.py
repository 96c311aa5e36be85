"""`cost` from options to a table and files: figures from a summary where one is given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.console import Console

from modelhost.toolkit.cost import EXAMPLE_PRICES, Instance, Serverless, cost_summary
from modelhost.toolkit.report import files, html
from modelhost.toolkit.report.terminal import table


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


def cost_command(
    console: Console,
    *,
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
    volumes: list[float],
    out: Path,
    example_prices: list[str],
) -> dict[str, Any]:
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
