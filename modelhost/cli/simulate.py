"""`modelhost simulate ACCESS_LOG`: hit ratio by memory budget for each eviction policy."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from modelhost.config import ADMISSIONS, EVICTION_POLICIES
from modelhost.errors import ConfigError
from modelhost.toolkit.cost import EXAMPLE_PRICES
from modelhost.toolkit.options import Number

if TYPE_CHECKING:
    from modelhost.toolkit.simulate.trace import Trace


@click.command(context_settings={"max_content_width": 100})
@click.argument("access_log", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--sizes",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="JSON {model: size in memory} (bytes or 64MiB), for models the log gives no size",
)
@click.option("--default-size", help="size of a model neither the log nor --sizes gives (64MiB)")
@click.option(
    "--budgets",
    default="",
    help="comma-separated budgets (1GiB,2GiB) [default: 16 from the largest model to all of them]",
)
@click.option(
    "--target",
    type=Number(float, 0, above=True, maximum=1),
    default=0.9,
    show_default=True,
    help="hit ratio to find the budget for",
)
@click.option(
    "--policy",
    "policies",
    type=click.Choice(EVICTION_POLICIES),
    multiple=True,
    default=("lru", "cost-aware"),
    show_default=True,
    help="the server's --eviction-policy to replay (repeat for several)",
)
@click.option(
    "--admission",
    "admissions",
    type=click.Choice(ADMISSIONS),
    multiple=True,
    default=("none", "tinylfu"),
    show_default=True,
    help="the server's --admission filter to replay each policy with (repeat for several)",
)
@click.option(
    "--min-residency-s",
    type=Number(float, 0),
    default=0.0,
    show_default=True,
    help="the server's --min-residency-s (by the log's request times)",
)
@click.option(
    "--loaders",
    type=Number(int, 1),
    help="also replay each policy with loads in line for this many loaders (the server's "
    "--workers), each load as --load-events says it ran: the hit ratio the server's header shows",
)
@click.option(
    "--load-events",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="the server's log (or a saved GET /events stream) whose load events give, with "
    "--loaders, each load's time on its loader and the room it took",
)
@click.option(
    "--no-optimum",
    is_flag=True,
    help="skip the optimum (a linear program: slow on long traces with models of different sizes)",
)
@click.option(
    "--instances",
    default="",
    help="fleet sizes (1,2,4,8): replay through nginx's consistent hash instead, one instance "
    "per --budget-per-instance",
)
@click.option("--budget-per-instance", help="each instance's --memory-budget, with --instances")
@click.option(
    "--servers",
    default="modelhost-{i}:8080",
    show_default=True,
    help="each instance's nginx `server` line, {i} its index: its address (and weight=) hashed",
)
@click.option(
    "--spread",
    multiple=True,
    help="MODEL=K: a hot model nginx spreads over K instances (2-4; repeat for several)",
)
@click.option(
    "--tenant-from",
    default="",
    help="also replay per tenant, the tenant as the server's --tenant-from finds it: name:N (the "
    "model name's first N segments), or header (the access log's tenant field)",
)
@click.option(
    "--tenants-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="with --tenant-from: replay under this tenants file's memory shares (memory_min, "
    "memory_max), as the server's --tenants-file",
)
@click.option(
    "--instance-price",
    type=Number(float, 0),
    default=EXAMPLE_PRICES["instance_per_hour"],
    show_default=True,
    help="price per instance-hour (an example, not a quote)",
)
@click.option(
    "--throughput-rps",
    type=Number(float, 0),
    default=0.0,
    help="one instance's measured throughput (bench): gives the cost per million requests",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("simulate-out"),
    show_default=True,
)
def simulate(
    access_log: Path,
    sizes: Path | None,
    default_size: str | None,
    budgets: str,
    target: float,
    policies: tuple[str, ...],
    admissions: tuple[str, ...],
    min_residency_s: float,
    loaders: int | None,
    load_events: Path | None,
    no_optimum: bool,
    instances: str,
    budget_per_instance: str | None,
    servers: str,
    spread: tuple[str, ...],
    tenant_from: str,
    tenants_file: Path | None,
    instance_price: float,
    throughput_rps: float,
    out: Path,
) -> None:
    """Replay ACCESS_LOG (from `serve --access-log`) through LRU, each policy and the optimum.

    --loaders also replays the server's loads, so a request waiting for a load is a miss.
    --instances replays through a fleet behind the shipped nginx config instead.
    --tenant-from also replays per tenant, at each --budgets (or the budget LRU needs)."""
    from modelhost.toolkit.report.terminal import console_for, show, table
    from modelhost.toolkit.simulate.fleet_run import FleetOptions
    from modelhost.toolkit.simulate.run import (
        ROOM,
        default_budgets,
        in_line,
        needed_text,
        replayed_curves,
        rows_of,
        simulate_summary,
        write_simulate,
    )
    from modelhost.toolkit.simulate.tenant_run import tenant_tables, write_tenants
    from modelhost.toolkit.simulate.trace import read_access_log, read_sizes
    from modelhost.units import parse_size

    console = console_for()
    fleet_only = {
        "--spread": spread,
        "--budget-per-instance": budget_per_instance,
        "--throughput-rps": throughput_rps,
        "--servers": servers != "modelhost-{i}:8080",
        "--instance-price": instance_price != EXAMPLE_PRICES["instance_per_hour"],
    }
    try:
        if not instances and any(fleet_only.values()):
            named = ", ".join(flag for flag, given in fleet_only.items() if given)
            raise ValueError(f"{named}: give --instances N,... too, or they change nothing")
        size_map = read_sizes(sizes) if sizes else None
        default = parse_size(default_size) if default_size else None
        trace = read_access_log(access_log, size_map, default)
        if not trace.models:
            raise ValueError(f"{access_log} has no invocations that reached a model")
        if instances and (tenant_from or tenants_file):
            raise ValueError("--tenant-from replays one instance: leave out --instances")
        if instances:
            fleet = FleetOptions(instances, budget_per_instance, servers, spread)
            fleet.report(trace, instance_price, throughput_rps, out, console)
            return
        grid = [parse_size(b) for b in budgets.split(",") if b] or default_budgets(trace)
        replayed = replayed_curves(policies, admissions, min_residency_s)
        queued = in_line(loaders, load_events)
        summary = simulate_summary(
            trace,
            sorted(grid),
            target,
            with_optimum=not no_optimum,
            replayed=replayed,
            in_line=queued,
        )
        tenants = tenant_from or tenants_file
        runs = per_tenant(
            trace,
            summary,
            tenant_from=tenant_from,
            tenants_file=tenants_file,
            budgets=budgets,
            policies=policies,
        )
    except (ValueError, ConfigError) as exc:
        raise click.UsageError(str(exc)) from None
    header, rows = rows_of(summary)
    console.print(table("hit ratio by memory budget", header, rows))
    for line in [*needed_text(summary), ROOM]:
        console.print(line)
    paths = list(write_simulate(out, summary).values())
    if tenants:
        show(console, tenant_tables(runs))
        paths.append(write_tenants(out, runs))
    console.print("wrote " + ", ".join(str(p) for p in paths))


def per_tenant(
    trace: Trace,
    summary: dict[str, Any],
    *,
    tenant_from: str,
    tenants_file: Path | None,
    budgets: str,
    policies: tuple[str, ...],
) -> list[dict[str, Any]]:
    """Each tenant's figures, with --tenant-from, at --budgets or the budget LRU needs."""
    from modelhost.toolkit.simulate.tenant_run import tenant_budgets, tenant_runs

    if not tenant_from and not tenants_file:
        return []
    given = bool(budgets.strip(","))
    needed = summary["budget_needed_bytes"]["lru"]
    at = tenant_budgets(summary["budgets_bytes"], given, needed)
    return tenant_runs(trace, tenant_from, tenants_file, at, policies)
