"""Metrics users' handlers record through `context.metrics`."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

KINDS = ("counter", "gauge", "histogram")  # TorchServe's MetricTypes, by value
MAX_SERIES = 1000


class HandlerSample(msgspec.Struct, frozen=True, array_like=True):
    model: str
    name: str
    unit: str
    kind: str
    value: float
    dimensions: tuple[tuple[str, str], ...] = ()


SeriesKey = tuple[str, str, str, str, tuple[tuple[str, str], ...]]


@dataclass
class Series:
    """A counter's total, a gauge's last value, or a histogram's sum and count."""

    value: float = 0.0
    count: int = 0


class HandlerMetrics:
    """Capped, so a request id in a dimension cannot grow the frontend."""

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self.max_series = max_series
        self.series: dict[SeriesKey, Series] = {}
        self.dropped = 0

    def record(self, samples: tuple[HandlerSample, ...]) -> None:
        for sample in samples:
            key = (sample.model, sample.name, sample.unit, sample.kind, sample.dimensions)
            series = self.series.get(key)
            if series is None:
                if len(self.series) >= self.max_series:
                    self.dropped += 1
                    continue
                series = self.series[key] = Series()
            series.count += 1
            series.value = sample.value if sample.kind == "gauge" else series.value + sample.value
