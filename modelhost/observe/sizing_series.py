"""The sizing families of /metrics: what the live miss-ratio curve says about the budget, for
alerts and autoscalers (deploy/k8s/base/hpa.yaml scales on `modelhost_instances_needed`)."""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

from modelhost.records.statistics import SizingStatistics


def sizing_families(s: SizingStatistics) -> Iterator[Metric]:
    yield _by_label(
        "modelhost_memory_needed_bytes",
        "The memory budget at which the last hour's requests would reach this hit ratio under "
        "LRU (absent: no budget reaches it, too many requests are a name's first)",
        "hit_ratio",
        s.budget_needed,
    )
    yield _by_label(
        "modelhost_hit_ratio_at_budget",
        "LRU's hit ratio on the last hour's requests with this multiple of today's room for "
        "models (the budget less the idle server)",
        "budget_factor",
        s.hit_ratio_at_factor,
    )
    yield from _instances(s)
    yield from _thrash(s)


def _by_label(name: str, help_text: str, label: str, values: dict[float, float]) -> Metric:
    """A gauge with one series a key; an infinite value (out of reach) has none."""
    family = GaugeMetricFamily(name, help_text, labels=[label])
    for key, value in values.items():
        if not math.isinf(value):
            family.add_metric([f"{key:g}"], value)
    return family


def _instances(s: SizingStatistics) -> Iterator[Metric]:
    yield _by_label(
        "modelhost_instances_needed",
        "The room this instance's requests need for this hit ratio, in instances of its size: "
        "a fleet behind a model-affinity hash needs the sum over its instances (absent while "
        "not known: no curve yet, or no budget reaches it)",
        "hit_ratio",
        s.instances_needed,
    )
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
