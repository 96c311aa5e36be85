"""`simulate --tenant-from`: each tenant's figures at a few budgets, as tables and tenants.json."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.table import Table

from modelhost.config.tenancy import parse_tenant_from
from modelhost.config.tenant_policies import TenantPolicies
from modelhost.toolkit.report import files
from modelhost.toolkit.report.terminal import table
from modelhost.toolkit.simulate.tenants import replay_tenants, tenants_of
from modelhost.toolkit.simulate.trace import Trace
from modelhost.units import format_bytes

SHOWN_TENANTS = 20  # the busiest in a table; tenants.json has every one
UNBOUNDED_DISK_BYTES = 2**62  # simulate has no disk tier: any disk_max fits
HEADER = ["tenant", "requests", "hit ratio", "loads", "evictions suffered", "refused (507)"]


def tenant_budgets(budgets: Sequence[int], given: bool, needed_bytes: float) -> list[int]:
    """The budgets given, else the least at which LRU reaches the target (else the largest)."""
    if given or not math.isfinite(needed_bytes):
        return list(budgets) if given else [max(budgets)]
    return [max(int(needed_bytes), min(budgets))]


def tenant_runs(
    trace: Trace,
    tenant_from: str,
    tenants_file: Path | None,
    budgets: Sequence[int],
    policies: Sequence[str],
) -> list[dict[str, Any]]:
    """Per budget and policy: the total and each tenant's figures, under the tenants file."""
    rule = parse_tenant_from(tenant_from)
    if rule is None:
        raise ValueError(
            "--tenants-file gives each tenant its share: give --tenant-from too (name:N, or "
            "header as the server's access log recorded it)"
        )
    tenants = tenants_of(trace, rule)
    runs = []
    for budget in budgets:
        quotas = _quotas(tenants_file, budget)
        for policy in policies:
            replay = replay_tenants(trace, tenants, budget, policy, quotas)
            by_tenant = sorted(replay.tenants.items(), key=lambda item: -item[1].requests)
            runs.append(
                {
                    "budget_bytes": budget,
                    "policy": policy,
                    "total": replay.total.as_dict(),
                    "tenants": {name: figures.as_dict() for name, figures in by_tenant},
                }
            )
    return runs


def _quotas(tenants_file: Path | None, budget_bytes: int) -> TenantPolicies | None:
    """The file's shares at this memory budget."""
    if tenants_file is None:
        return None
    from modelhost.config.tenants_file import read_tenants_file

    policies: TenantPolicies = read_tenants_file(
        tenants_file, budget_bytes, UNBOUNDED_DISK_BYTES, memory_flag="--budgets"
    )
    return policies


def tenant_tables(runs: Sequence[dict[str, Any]]) -> list[Table]:
    return [
        table(
            f"tenants at {format_bytes(run['budget_bytes'])}, {run['policy']}",
            HEADER,
            [
                *(_row(name, f) for name, f in list(run["tenants"].items())[:SHOWN_TENANTS]),
                _row("total", run["total"]),
            ],
        )
        for run in runs
    ]


def _row(name: str, figures: dict[str, Any]) -> list[Any]:
    keys = ("requests", "hit_ratio", "loads", "evictions_suffered", "refused")
    return [name, *(figures[key] for key in keys)]


def write_tenants(out_dir: Path, runs: Sequence[dict[str, Any]]) -> Path:
    return files.write_json(out_dir / "tenants.json", {"runs": list(runs)})
