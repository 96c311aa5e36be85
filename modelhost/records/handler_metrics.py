"""What users' handlers record through `context.metrics`: samples sent with a batch's answers,
and the frontend's running table of them that `/metrics` renders.

Series are keyed by model, metric name and the handler's dimensions; the table keeps at most
`max_series` of them, so a handler that puts a request id in a dimension cannot grow the
frontend without bound (the samples past the cap are counted, not kept).
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

KINDS = ("counter", "gauge", "histogram")  # TorchServe's MetricTypes, by value
MAX_SERIES = 1000


class HandlerSample(msgspec.Struct, frozen=True, array_like=True):
    """One call of `context.metrics` in a worker: which model's handler made it, and what."""

    model: str
    name: str
    unit: str
    kind: str  # one of KINDS
    value: float
    dimensions: tuple[tuple[str, str], ...] = ()


SeriesKey = tuple[str, str, str, str, tuple[tuple[str, str], ...]]  # model, name, unit, kind, dims


@dataclass
class Series:
    """A series' state: a counter's total, a gauge's last value, a histogram's sum and count."""

    value: float = 0.0
    count: int = 0


class HandlerMetrics:
    """The frontend's table of handler series, fed with each batch's samples."""

    def __init__(self, max_series: int = MAX_SERIES) -> None:
        self.max_series = max_series
        self.series: dict[SeriesKey, Series] = {}
        self.dropped = 0  # samples of series past the cap

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
