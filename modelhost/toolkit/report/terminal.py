"""Tables in the terminal, drawn by rich."""

from __future__ import annotations

from collections.abc import Sequence
from typing import IO, Any

from rich.console import Console
from rich.table import Table

from modelhost.toolkit import stats
from modelhost.toolkit.report.html import cell

SHOWN_TENANTS = 20  # rows of the tenant table


PIPED_WIDTH = 240  # a log or a file has no width: the tables' own widths fit in it


def console_for(file: IO[str] | None = None) -> Console:
    """A console that, piped, does not narrow tables to 80 columns."""
    console = Console(file=file)
    return console if console.is_terminal else Console(file=file, width=PIPED_WIDTH)


def table(
    title: str, header: Sequence[str], rows: Sequence[Sequence[Any]], highlight: int | None = None
) -> Table:
    shown = Table(title=title, title_justify="left")
    for index, name in enumerate(header):
        # fold, not "…": a narrow terminal must not cut a figure
        shown.add_column(name, justify="left" if index == 0 else "right", overflow="fold")
    for index, row in enumerate(rows):
        shown.add_row(*(_plain(v) for v in row), style="bold green" if index == highlight else None)
    return shown


def _plain(value: Any) -> str:
    return cell(value).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def bench_tables(summary: dict[str, Any]) -> list[Table]:
    requests, latency = summary["requests"], summary["latency_ms"]
    main = table(
        f"bench {summary['target']} ({summary['load']})",
        ["throughput/s", "requests", *latency, "errors"],
        [
            [
                summary["throughput_rps"],
                requests["measured"],
                *latency.values(),
                requests["measured"] - requests["ok"],
            ]
        ],
    )
    tables = [main]
    if requests["errors"]:
        tables.append(table("errors", stats.ERROR_COLUMNS, stats.error_rows(requests)))
    if summary["cache"]:
        tables.append(
            table(
                "cache tier (X-Modelhost-Cache)", ["tier", "count"], list(summary["cache"].items())
            )
        )
    if len(summary.get("instances", {})) > 1:
        spread = list(summary["instances"].items())
        tables.append(table("answered by (X-Modelhost-Instance)", ["instance", "count"], spread))
    if summary.get("tenants"):
        tables.append(tenant_table(summary["tenants"]))
    if summary["server_timing_ms"]:
        parts = summary["server_timing_ms"]
        rows = [[part, f["mean"], f["p50"], f["p99"]] for part, f in parts.items()]
        tables.append(table("Server-Timing (ms)", ["part", "mean", "p50", "p99"], rows))
    return tables


def tenant_table(tenants: dict[str, Any]) -> Table:
    """The busiest SHOWN_TENANTS; summary.json has every one."""
    rows = [
        [
            tenant,
            figures["requests"],
            figures["throughput_rps"],
            figures["latency_ms"]["p50"],
            figures["latency_ms"]["p99"],
            ", ".join(f"{status}: {n}" for status, n in figures["refused"].items()) or "none",
        ]
        for tenant, figures in list(tenants.items())[:SHOWN_TENANTS]
    ]
    more = (
        f" (the busiest {SHOWN_TENANTS} of {len(tenants)})" if len(tenants) > SHOWN_TENANTS else ""
    )
    header = ["tenant", "requests", "throughput/s", "p50 ms", "p99 ms", "refused by status"]
    return table("by tenant" + more, header, rows)


def show(console: Console, tables: Sequence[Table], warnings: Sequence[str] = ()) -> None:
    for shown in tables:
        console.print(shown)
    for warning in warnings:
        console.print(f"[bold yellow]warning:[/] {warning}")
