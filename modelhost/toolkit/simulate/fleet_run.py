"""`simulate --instances`: more, smaller instances or fewer, larger ones?"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from modelhost.toolkit.cost import EXAMPLE_PRICES
from modelhost.toolkit.report import files
from modelhost.toolkit.simulate.fleet import FleetRun, replay_fleet, server_names
from modelhost.toolkit.simulate.trace import Trace
from modelhost.units import format_bytes


def parse_spread(pairs: Sequence[str]) -> dict[str, int]:
    """MODEL=K pairs, K from 2 to 4 as the config's split_clients has, as a dict."""
    spread = {}
    for pair in pairs:
        model, _, k = pair.rpartition("=")
        if not model or k not in ("2", "3", "4"):
            raise ValueError(f"--spread {pair!r}: give MODEL=K with K 2, 3 or 4")
        spread[model] = int(k)
    return spread


def fleet_summary(
    trace: Trace,
    sizes: Sequence[int],
    budget_bytes: int,
    *,
    template: str,
    spread: Mapping[str, int],
    price_per_hour: float,
    throughput_rps: float = 0.0,
) -> dict[str, Any]:
    runs = [
        replay_fleet(trace, server_names(n, template), budget_bytes, spread=spread) for n in sizes
    ]
    pooled = {n: one_instance_hit_ratio(trace, n * budget_bytes) for n in sizes}
    return {
        "requests": len(trace.models),
        "models": len(trace.sizes),
        "budget_per_instance_bytes": budget_bytes,
        "spread": dict(spread),
        "price_per_hour": price_per_hour,
        "example_price": price_per_hour == EXAMPLE_PRICES["instance_per_hour"],
        "throughput_rps_per_instance": throughput_rps or None,
        "fleets": [
            _fleet(run, price_per_hour, throughput_rps)
            | {"pooled_hit_ratio": pooled[run.instances]}
            for run in runs
        ],
    }


def one_instance_hit_ratio(trace: Trace, budget_bytes: int) -> float:
    """One instance with the whole fleet's memory, to price the hash's split."""
    return replay_fleet(trace, ["pooled"], budget_bytes).hit_ratio


def _fleet(run: FleetRun, price_per_hour: float, throughput_rps: float) -> dict[str, Any]:
    cost = run.cost_per_million(price_per_hour, throughput_rps) if throughput_rps else None
    return {
        "instances": run.instances,
        "servers": run.servers,
        "memory_bytes": run.budget_bytes * run.instances,
        "hit_ratio": run.hit_ratio,
        "requests": run.requests,
        "loads": run.loads,
        "request_shares": run.request_shares,
        "load_shares": run.load_shares,
        "imbalance": run.imbalance,
        "cost_per_million": cost,
    }


# pooled: one instance with all the memory; busiest: its share of requests; imbalance: ÷ mean
HEADER = ["n", "memory", "hit", "pooled", "busiest", "imbalance", "loads", "$/M"]


def fleet_rows(summary: dict[str, Any]) -> list[list[Any]]:
    return [
        [
            f["instances"],
            format_bytes(f["memory_bytes"]),
            f["hit_ratio"],
            f["pooled_hit_ratio"],
            f"{max(f['request_shares']):.1%}",
            f["imbalance"],
            f"{max(f['load_shares']):.1%}",
            "-" if f["cost_per_million"] is None else round(f["cost_per_million"], 4),
        ]
        for f in summary["fleets"]
    ]


def write_fleet(out_dir: Path, summary: dict[str, Any]) -> dict[str, Path]:
    rows = [[f["instances"], f["hit_ratio"], f["imbalance"]] for f in summary["fleets"]]
    return {
        "summary": files.write_json(out_dir / "simulate-fleet.json", summary),
        "csv": files.write_csv(
            out_dir / "simulate-fleet.csv", ["instances", "hit_ratio", "imbalance"], rows
        ),
    }


class FleetOptions:
    def __init__(
        self, instances: str, budget: str | None, template: str, spread: Sequence[str]
    ) -> None:
        from modelhost.units import parse_size

        try:
            self.sizes = [int(n) for n in instances.split(",") if n.strip()]
        except ValueError:
            raise ValueError(f"--instances {instances!r}: give counts like 1,2,4,8") from None
        if not self.sizes or min(self.sizes) < 1:
            raise ValueError(f"--instances {instances!r}: give counts like 1,2,4,8")
        if not budget:
            raise ValueError("--instances needs --budget-per-instance SIZE")
        if "{i}" not in template:
            raise ValueError(f"--servers {template!r} needs {{i}}, each instance's index")
        self.budget_bytes = parse_size(budget)
        self.template = template
        self.spread = parse_spread(spread)

    def report(
        self, trace: Trace, price: float, throughput_rps: float, out: Path, console: Any
    ) -> None:
        from modelhost.toolkit.report.terminal import table

        summary = fleet_summary(
            trace,
            self.sizes,
            self.budget_bytes,
            template=self.template,
            spread=self.spread,
            price_per_hour=price,
            throughput_rps=throughput_rps,
        )
        title = f"a fleet of {format_bytes(self.budget_bytes)} instances behind nginx"
        console.print(table(title, HEADER, fleet_rows(summary)))
        if summary["example_price"] and throughput_rps:
            console.print(
                f"[yellow]$/M at an example price of ${price:g} an instance-hour "
                f"({EXAMPLE_PRICES['source']}): set --instance-price[/]"
            )
        written = write_fleet(out, summary)
        console.print("wrote " + ", ".join(str(p) for p in written.values()))
