"""Prometheus families for what users' handlers record through `context.metrics`: one family per
metric name and kind, `modelhost_handler_<name>_<unit>`, labelled by model and the handler's
dimensions (a counter's total, a gauge's last value, a histogram's sum and count)."""

from __future__ import annotations

import re
from collections.abc import Iterator

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
    SummaryMetricFamily,
)

from modelhost.records.handler_metrics import HandlerMetrics, Series

_NOT_A_NAME = re.compile(r"[^a-zA-Z0-9_]+")


def metric_name(name: str, unit: str) -> str:
    """`HandlerTime` in ms → modelhost_handler_handlertime_ms."""
    parts = [_NOT_A_NAME.sub("_", part).strip("_").lower() for part in (name, unit)]
    return "_".join(["modelhost_handler", *(part for part in parts if part)])


def handler_families(table: HandlerMetrics) -> Iterator[Metric]:
    """The table's series grouped into families; a family's label names are its first series'."""
    families: dict[tuple[str, str], tuple[Metric, list[str]]] = {}
    for key, series in table.series.items():
        model, name, unit, kind, dimensions = key
        family_key = (metric_name(name, unit), kind)
        if family_key not in families:
            labels = ["model", *(_label(dimension) for dimension, _ in dimensions)]
            families[family_key] = (_family(family_key[0], kind, name, labels), labels)
        family, labels = families[family_key]
        values = [model, *(value for _, value in dimensions)]
        if len(values) == len(labels):  # a series with other dimensions than its family's: left out
            _add(family, kind, values, series)
    for family, _ in families.values():
        yield family
    if table.dropped:
        yield CounterMetricFamily(
            "modelhost_handler_samples_dropped",
            f"Handler metric samples not kept: past {table.max_series} series",
            value=table.dropped,
        )


def _label(dimension: str) -> str:
    label = _NOT_A_NAME.sub("_", dimension).strip("_").lower() or "dimension"
    return "handler_model" if label == "model" else label


def _family(name: str, kind: str, handler_name: str, labels: list[str]) -> Metric:
    help_text = f"{handler_name}, as the model's handler records it (context.metrics)"
    if kind == "counter":
        return CounterMetricFamily(name, help_text, labels=labels)
    if kind == "gauge":
        return GaugeMetricFamily(name, help_text, labels=labels)
    return SummaryMetricFamily(name, help_text, labels=labels)


def _add(family: Metric, kind: str, values: list[str], series: Series) -> None:
    if isinstance(family, SummaryMetricFamily):
        family.add_metric(values, count_value=series.count, sum_value=series.value)
    elif isinstance(family, (CounterMetricFamily, GaugeMetricFamily)):
        family.add_metric(values, series.value)
