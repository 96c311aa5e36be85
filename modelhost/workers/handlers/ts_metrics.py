"""`context.metrics` as TorchServe's handlers call it, sent with the next answer to /metrics.

The calls and defaults follow TorchServe's metrics cache; nothing is logged.
"""

from __future__ import annotations

import threading
from typing import Any

from modelhost.records.handler_metrics import KINDS, HandlerSample

TIME_UNITS = ("ms", "s")
SIZE_UNITS = ("MB", "kB", "GB", "B")

# samples since the last answer, from every model of this worker
_pending: list[HandlerSample] = []
MAX_PENDING = 10_000  # then samples are dropped
_pending_lock = threading.Lock()


def drain_samples() -> tuple[HandlerSample, ...]:
    """The samples recorded since the last call, for the answer about to be sent."""
    if not _pending:  # the common case
        return ()
    with _pending_lock:
        samples = tuple(_pending)
        _pending.clear()
    return samples


def _kind(metric_type: Any) -> str:
    """A TorchServe `MetricTypes` member, or its value, as one of KINDS."""
    kind = str(getattr(metric_type, "value", metric_type)).lower()
    if kind not in KINDS:
        raise ValueError(f"metric type {metric_type!r} is not one of {', '.join(KINDS)}")
    return kind


def _pairs(names: list[str], values: list[Any]) -> tuple[tuple[str, str], ...]:
    if len(names) != len(values):
        raise ValueError(f"the metric has dimensions {names}, given {len(values)} values")
    return tuple(zip(names, (str(value) for value in values), strict=True))


class HandlerMetric:
    """One metric a handler made or got (`add_metric_to_cache`, `get_metric`)."""

    def __init__(self, model: str, name: str, unit: str, dimension_names: list[str], kind: str):
        self.model = model
        self.metric_name = name
        self.unit = unit
        self.dimension_names = list(dimension_names)
        self.metric_type = kind

    def add_or_update(
        self, value: float, dimension_values: list[Any] | None = None, request_id: str = ""
    ) -> None:
        dimensions = _pairs(self.dimension_names, list(dimension_values or []))
        if not isinstance(value, (int, float)):
            raise ValueError(f"metric {self.metric_name}: {value!r} is not a number")
        sample = HandlerSample(
            model=self.model,
            name=self.metric_name,
            unit=self.unit,
            kind=self.metric_type,
            value=float(value),
            dimensions=dimensions,
        )
        with _pending_lock:
            if len(_pending) < MAX_PENDING:
                _pending.append(sample)

    def update(
        self, value: float, request_id: str = "", dimensions: list[Any] | None = None
    ) -> None:
        """TorchServe's older call: the dimensions given replace the metric's."""
        given = list(dimensions or [])
        self.dimension_names = [d.name for d in given]
        self.add_or_update(value, [d.value for d in given], request_id)


class HandlerMetrics:
    """The `metrics` of a TorchServe context, for one model."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._metrics: dict[tuple[str, str], HandlerMetric] = {}
        self.request_ids: Any = None  # for handlers that read it

    def add_metric_to_cache(
        self,
        metric_name: str,
        unit: str,
        dimension_names: list[str] | None = None,
        metric_type: Any = "counter",
    ) -> HandlerMetric:
        kind = _kind(metric_type)
        metric = HandlerMetric(self.model, metric_name, unit, list(dimension_names or []), kind)
        self._metrics[(metric_name, kind)] = metric
        return metric

    def get_metric(self, metric_name: str, metric_type: Any = "counter") -> HandlerMetric:
        metric = self._metrics.get((metric_name, _kind(metric_type)))
        if metric is None:
            raise KeyError(f"no {_kind(metric_type)} metric {metric_name} was added")
        return metric

    def add_metric(
        self,
        name: str,
        value: float,
        unit: str,
        idx: Any = None,
        dimensions: list[Any] | None = None,
        metric_type: Any = "counter",
    ) -> None:
        self._add(name, value, unit, dimensions, _kind(metric_type))

    def add_counter(
        self, name: str, value: float, idx: Any = None, dimensions: list[Any] | None = None
    ) -> None:
        self._add(name, value, "count", dimensions, "counter")

    def add_time(
        self,
        name: str,
        value: float,
        idx: Any = None,
        unit: str = "ms",
        dimensions: list[Any] | None = None,
        metric_type: Any = "gauge",
    ) -> None:
        if unit not in TIME_UNITS:
            raise ValueError(f"the unit of a time metric is one of {list(TIME_UNITS)}, not {unit}")
        self._add(name, value, unit, dimensions, _kind(metric_type))

    def add_size(
        self,
        name: str,
        value: float,
        idx: Any = None,
        unit: str = "MB",
        dimensions: list[Any] | None = None,
        metric_type: Any = "gauge",
    ) -> None:
        if unit not in SIZE_UNITS:
            raise ValueError(f"the unit of a size metric is one of {list(SIZE_UNITS)}, not {unit}")
        self._add(name, value, unit, dimensions, _kind(metric_type))

    def add_percent(
        self,
        name: str,
        value: float,
        idx: Any = None,
        dimensions: list[Any] | None = None,
        metric_type: Any = "gauge",
    ) -> None:
        self._add(name, value, "percent", dimensions, _kind(metric_type))

    def add_error(self, name: str, value: float, dimensions: list[Any] | None = None) -> None:
        self._add(name, value, "", dimensions, "counter")

    def _add(
        self, name: str, value: float, unit: str, dimensions: list[Any] | None, kind: str
    ) -> None:
        """As TorchServe: the metric of this name and kind, made on first use."""
        given = list(dimensions or [])
        metric = self._metrics.get((name, kind))
        if metric is None:
            metric = self.add_metric_to_cache(name, unit, [d.name for d in given], kind)
        metric.add_or_update(value, [d.value for d in given])
