"""`cost`: a million requests on an always-on instance and serverless, and the break-even.

EXAMPLE_PRICES are examples only, labelled with where and when they were read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from modelhost.toolkit.options import numbers, option
from modelhost.toolkit.sizing import MemoryInstances, memory_instances

if TYPE_CHECKING:
    from rich.console import Console

HOURS_PER_MONTH = 730.0  # 365 × 24 / 12
NO_BREAK_EVEN = "no break-even: an instance costs more a request than serverless at every volume"
VOLUMES = "1e5,1e6,1e7,1e8,1e9"

EXAMPLE_PRICES = {
    "source": "AWS SageMaker pricing page, us-east-1, as read in 2024 — an example, not a quote",
    "instance_per_hour": 0.115,  # ml.m5.large real-time inference
    "gb_second": 0.00002,  # serverless inference, per GB of memory per second
    "data_per_gb": 0.016,  # serverless data processed, in + out
    "per_million_requests": 0.0,
}


@dataclass(frozen=True, kw_only=True)
class Instance:
    price_per_hour: float
    throughput_rps: float  # measured, at the latency limit
    utilization: float = 1.0  # the share the traffic may use
    min_count: int = 1  # the fleet's memory for the models (GET /sizing's instancesNeeded)

    @property
    def requests_per_hour(self) -> float:
        return self.throughput_rps * 3600 * self.utilization

    def per_million(self) -> float:
        return self.price_per_hour / self.requests_per_hour * 1e6

    def count_for(self, monthly_requests: float) -> int:
        """Instances to answer the volume; at least those the models' memory needs."""
        capacity = self.requests_per_hour * HOURS_PER_MONTH
        return max(self.min_count, math.ceil(monthly_requests / capacity))

    def monthly(self, monthly_requests: float) -> float:
        return self.count_for(monthly_requests) * self.price_per_hour * HOURS_PER_MONTH


@dataclass(frozen=True, kw_only=True)
class Serverless:
    gb_second: float
    memory_gb: float
    latency_ms: float  # billed duration of one request
    data_per_gb: float = 0.0
    bytes_per_request: float = 0.0  # in + out
    per_million_requests: float = 0.0

    def per_request(self) -> float:
        compute = self.gb_second * self.memory_gb * self.latency_ms / 1000
        data = self.data_per_gb * self.bytes_per_request / 1e9
        return compute + data + self.per_million_requests / 1e6

    def per_million(self) -> float:
        return self.per_request() * 1e6

    def monthly(self, monthly_requests: float) -> float:
        return self.per_request() * monthly_requests


def break_even(instance: Instance, serverless: Serverless) -> float | None:
    """Monthly requests where the smallest fleet and serverless cost the same.

    None where an instance costs more a request: one cannot answer the volume its price buys,
    so serverless is cheaper at every volume. Otherwise the smallest fleet answers that volume.
    """
    if instance.per_million() > serverless.per_million():
        return None
    return instance.min_count * instance.price_per_hour * HOURS_PER_MONTH / serverless.per_request()


def savings_table(
    instance: Instance, serverless: Serverless, volumes: list[float]
) -> list[dict[str, Any]]:
    rows = []
    for volume in volumes:
        on_instance, on_serverless = instance.monthly(volume), serverless.monthly(volume)
        rows.append(
            {
                "monthly_requests": volume,
                "instances": instance.count_for(volume),
                "instance_monthly": on_instance,
                "serverless_monthly": on_serverless,
                "cheaper": "instance" if on_instance < on_serverless else "serverless",
                "saving_monthly": abs(on_instance - on_serverless),
            }
        )
    return rows


def cost_summary(
    instance: Instance,
    serverless: Serverless,
    volumes: list[float],
    source: str,
    memory: MemoryInstances | None = None,
) -> dict[str, Any]:
    return {
        "prices_source": source,
        "memory_instances": memory._asdict() if memory else None,
        "instance": {**vars(instance), "per_million": instance.per_million()},
        "serverless": {**vars(serverless), "per_million": serverless.per_million()},
        "break_even_monthly_requests": break_even(instance, serverless),
        "one_instance_capacity_monthly": instance.requests_per_hour * HOURS_PER_MONTH,
        "savings": savings_table(instance, serverless, volumes),
    }


def measured(path: Path | None) -> dict[str, float]:
    """Throughput, mean latency and bytes per request from a bench summary.json or tune.json."""
    if path is None:
        return {}
    summary: dict[str, Any] = json.loads(Path(path).read_text())
    if summary.get("throughput_rps") is None:
        raise ValueError(f"{path} has no throughput inside the latency limit")
    if not summary["throughput_rps"]:
        errors = summary.get("requests", {}).get("errors", {})
        raise ValueError(f"{path} has no request answered (errors: {errors}): nothing to price")
    found = {
        "throughput": float(summary["throughput_rps"]),
        # the bill sums every duration: the mean, tail and all
        "latency_ms": float(summary["latency_ms"].get("mean", summary["latency_ms"]["p50"])),
    }
    if summary.get("rate_rps"):  # open loop: the rate sent, not what an instance can answer
        found["rate_rps"] = float(summary["rate_rps"])
    if summary.get("bytes_per_request") is not None:  # absent from older summaries
        found["bytes_per_request"] = float(summary["bytes_per_request"])
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
        None,
        "requests/s one instance answers within the limit",
        show_default=False,
        minimum=0,
        above=True,
    )
    latency_ms: float | None = option(
        None,
        "billed duration of a serverless request [default: --from's mean]",
        show_default=False,
        minimum=0,
        above=True,
    )
    # prices and bytes may be 0, never below: a negative one reads as a saving
    instance_price: float = option(
        EXAMPLE_PRICES["instance_per_hour"], "per hour (example: ml.m5.large)", minimum=0
    )
    utilization: float = option(
        1.0, "share of the throughput the traffic may use", minimum=0, above=True, maximum=1
    )
    gb_second_price: float = option(EXAMPLE_PRICES["gb_second"], minimum=0)
    memory_gb: float = option(2.0, "serverless memory size", minimum=0, above=True)
    data_price: float = option(
        EXAMPLE_PRICES["data_per_gb"], "serverless, per GB in + out", minimum=0
    )
    bytes_per_request: float = option(0.0, "in + out [default: --from's, else 0]", minimum=0)
    request_price: float = option(
        EXAMPLE_PRICES["per_million_requests"], "serverless, per million requests", minimum=0
    )
    sizing: tuple[str, ...] = option(
        (),
        "a modelhost server's URL, or its saved GET /sizing answer: no fewer instances than "
        "its instancesNeeded, the memory its models need; repeat it for each of a fleet's",
    )
    hit_ratio: str = option("0.95", "--sizing's hit ratio", choices=("0.9", "0.95", "0.99"))
    volumes: str = option(VOLUMES, "monthly requests to compare")
    out: Path = option(Path("cost-out"), file_okay=False)


def check_ranges(**figures: float) -> None:
    """Each figure above zero, else a message naming its flag."""
    for name, value in figures.items():
        if not value > 0:
            raise ValueError(f"--{name.replace('_', '-')} {value:g}: give a figure above 0")


def defaults_said(defaults: Sequence[str], memory_gb: float) -> str:
    """What the figures assumed, by flag: the example prices and the serverless memory."""
    prices = [f"--{name.replace('_', '-')}" for name in defaults if name in EXAMPLE_PRICE_FIELDS]
    said = f"{', '.join(prices)} are examples: {EXAMPLE_PRICES['source']}" if prices else ""
    said = said or "prices given on the command line"
    if "memory_gb" in defaults:
        said += f"; serverless memory is --memory-gb's default, {memory_gb:g} GB: set yours"
    return said


EXAMPLE_PRICE_FIELDS = ("instance_price", "gb_second_price", "data_price")


def memory_said(memory: MemoryInstances | None) -> str:
    """Where the instance counts come from."""
    if memory is None:
        return (
            "instances counted for throughput alone: --sizing URL also counts the memory "
            "the models need (GET /sizing's instancesNeeded)"
        )
    return (
        f"a fleet of {memory.instances} at least: GET /sizing's instancesNeeded is "
        f"{memory.needed:g} for a {memory.hit_ratio:g} hit ratio"
    )


def cost_command(
    console: Console, options: CostOptions, example_prices: Sequence[str] = ()
) -> dict[str, Any]:
    """The table and files; `example_prices` names the figures left at their defaults."""
    from modelhost.toolkit.report import files, html
    from modelhost.toolkit.report.terminal import table

    from_summary, latency_ms, out = options.from_summary, options.latency_ms, options.out
    instance_price, utilization = options.instance_price, options.utilization
    gb_second_price, memory_gb = options.gb_second_price, options.memory_gb
    data_price, bytes_per_request = options.data_price, options.bytes_per_request
    request_price, volumes = options.request_price, numbers(options.volumes, float, "--volumes")
    throughput = options.throughput
    found = measured(from_summary)
    if found.get("rate_rps") and not throughput:
        raise ValueError(
            f"{from_summary} is an open loop run at {found['rate_rps']:g} requests/s: its "
            "throughput is the rate sent, not an instance's capacity. Give --throughput, or "
            "--from a closed-loop bench (--concurrency) or a tune.json"
        )
    throughput = throughput or found.get("throughput")
    latency_ms = latency_ms or found.get("latency_ms")
    bytes_per_request = bytes_per_request or found.get("bytes_per_request", 0.0)
    if not throughput or not latency_ms:
        raise ValueError("give --throughput and --latency-ms, or --from a bench/tune summary")
    check_ranges(throughput=throughput, latency_ms=latency_ms)  # --from's too
    hit_ratio = float(options.hit_ratio)
    memory = memory_instances(options.sizing, hit_ratio) if options.sizing else None
    instance = Instance(
        price_per_hour=instance_price,
        throughput_rps=throughput,
        utilization=utilization,
        min_count=memory.instances if memory else 1,
    )
    serverless = Serverless(
        gb_second=gb_second_price,
        memory_gb=memory_gb,
        latency_ms=latency_ms,
        data_per_gb=data_price,
        bytes_per_request=bytes_per_request,
        per_million_requests=request_price,
    )
    source = defaults_said(example_prices, memory_gb)
    summary = cost_summary(instance, serverless, volumes, source, memory)
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
    even = summary["break_even_monthly_requests"]
    console.print(
        f"instance ${instance.per_million():.4f} per million requests; serverless "
        f"${serverless.per_million():.4f}; "
        + (f"break-even {even:,.0f} requests a month" if even is not None else NO_BREAK_EVEN)
    )
    console.print(table("savings", header, rows))
    console.print(memory_said(memory))
    console.print(f"[yellow]{source}[/]")
    page = html.page(
        "modelhost cost",
        [
            (
                "Per million requests",
                html.table(
                    ["instance $", "serverless $", "break-even requests / month"],
                    [
                        [
                            instance.per_million(),
                            serverless.per_million(),
                            "none" if even is None else f"{even:,.0f}",
                        ]
                    ],
                ),
            ),
            ("Savings", html.table(header, rows)),
            ("Instances", html.paragraph(memory_said(memory), "note")),
            ("Prices", html.paragraph(source, "note")),
        ],
    )
    files.write_json(out / "cost.json", summary)
    (out / "cost.html").write_text(page)
    console.print(f"wrote {out / 'cost.json'}, {out / 'cost.html'}")
    return summary
