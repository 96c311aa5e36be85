"""`cost`: a million requests on an always-on instance and serverless, and the break-even.

EXAMPLE_PRICES are examples only, labelled with where and when they were read.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

HOURS_PER_MONTH = 730.0  # 365 × 24 / 12

EXAMPLE_PRICES = {
    "source": "AWS SageMaker pricing page, us-east-1, as read in 2024 — an example, not a quote",
    "instance_per_hour": 0.115,  # ml.m5.large real-time inference
    "gb_second": 0.00002,  # serverless inference, per GB of memory per second
    "data_per_gb": 0.016,  # serverless data processed, in + out
    "per_million_requests": 0.0,
}


@dataclass(frozen=True)
class Instance:
    price_per_hour: float
    throughput_rps: float  # measured, at the latency limit
    utilization: float = 1.0  # the share the traffic may use

    @property
    def requests_per_hour(self) -> float:
        return self.throughput_rps * 3600 * self.utilization

    def per_million(self) -> float:
        return self.price_per_hour / self.requests_per_hour * 1e6

    def count_for(self, monthly_requests: float) -> int:
        """Instances to answer the volume; at least one."""
        return max(1, math.ceil(monthly_requests / (self.requests_per_hour * HOURS_PER_MONTH)))

    def monthly(self, monthly_requests: float) -> float:
        return self.count_for(monthly_requests) * self.price_per_hour * HOURS_PER_MONTH


@dataclass(frozen=True)
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


def break_even(instance: Instance, serverless: Serverless) -> float:
    """Monthly requests where one instance and serverless cost the same."""
    return instance.price_per_hour * HOURS_PER_MONTH / serverless.per_request()


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
    instance: Instance, serverless: Serverless, volumes: list[float], source: str
) -> dict[str, Any]:
    return {
        "prices_source": source,
        "instance": {**vars(instance), "per_million": instance.per_million()},
        "serverless": {**vars(serverless), "per_million": serverless.per_million()},
        "break_even_monthly_requests": break_even(instance, serverless),
        "one_instance_capacity_monthly": instance.requests_per_hour * HOURS_PER_MONTH,
        "savings": savings_table(instance, serverless, volumes),
    }
