"""The sizing families of /metrics: what the live miss-ratio curve says about the budget, for
alerts and autoscalers (deploy/k8s/autoscaling scales on `modelhost_instances_needed`)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from modelhost.records.statistics import SizingStatistics


def sizing_families(s: SizingStatistics) -> Iterator[Metric]:
    needed = GaugeMetricFamily(
        "modelhost_memory_needed_bytes",
        "The memory budget at which the last hour's requests would reach this hit ratio under "
        "LRU (absent: no budget reaches it, too many requests are a name's first)",
        labels=["hit_ratio"],
    )
    for target, budget in s.budget_needed.items():
        if not math.isinf(budget):
            needed.add_metric([f"{target:g}"], budget)
    yield needed
    at_budget = GaugeMetricFamily(
        "modelhost_hit_ratio_at_budget",
        "LRU's hit ratio on the last hour's requests with this multiple of today's room for "
        "models (the budget less the idle server)",
        labels=["budget_factor"],
    )
    for factor, ratio in s.hit_ratio_at_factor.items():
        at_budget.add_metric([f"{factor:g}"], ratio)
    yield at_budget
    yield from _instances(s)
    yield from _thrash(s)


def _instances(s: SizingStatistics) -> Iterator[Metric]:
    instances = GaugeMetricFamily(
        "modelhost_instances_needed",
        "The room this instance's requests need for this hit ratio, in instances of its size: "
        "a fleet behind a model-affinity hash needs the sum over its instances",
        labels=["hit_ratio"],
    )
    for target, count in s.instances_needed.items():
        if not math.isinf(count):
            instances.add_metric([f"{target:g}"], count)
    yield instances
    if s.predicted_hit_ratio is not None:
        yield GaugeMetricFamily(
            "modelhost_hit_ratio_predicted",
            "LRU's hit ratio on the last hour's requests with today's room, by the live curve",
            value=s.predicted_hit_ratio,
        )
    yield GaugeMetricFamily(
        "modelhost_sizing_sample_rate",
        "The share of model names the live curve tracks (1: every name)",
        value=s.sample_rate,
    )


def _thrash(s: SizingStatistics) -> Iterator[Metric]:
    yield GaugeMetricFamily(
        "modelhost_thrashing",
        "1 while evicted models come back sooner than the cache's age (see the thrash events)",
        value=float(s.thrashing),
    )
    yield CounterMetricFamily(
        "modelhost_early_returns",
        "Requests for a model evicted less than the cache's age before",
        value=s.early_returns,
    )
