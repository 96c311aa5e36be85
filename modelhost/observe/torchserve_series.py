"""TorchServe's metric names over the same requests, for the dashboards and alerts built on them.

On the metrics port when config.properties says `metrics_mode=prometheus` (or with
--torchserve-metrics), with TorchServe's names, labels and units. The text is written here,
since prometheus_client would append `_total` to every counter's name.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable

from modelhost.observe.exchange import Exchange
from modelhost.observe.hits import Hits, at, places_by
from modelhost.observe.usage import UNCOUNTED_ERRORS, fits

MAX_MODELS = 32_768  # as the per-model counters: a million names must not grow it
STATUS_CLASSES = ("2XX", "4XX", "5XX")
# per model: requests, then the sums of latency and of queueing in microseconds
MODEL_SERIES = {
    "ts_inference_requests_total": ("Count", 0),
    "ts_inference_latency_microseconds": ("Microseconds", 1),
    "ts_queue_latency_microseconds": ("Microseconds", 2),
}
DEFAULT_VERSION = "default"  # TorchServe's label for a request that names no version


class TorchServeSeries:
    """TorchServe's counters, fed by each exchange and written as Prometheus text."""

    def __init__(
        self,
        hostname: str,
        versioned: Callable[[str], tuple[str, str] | None] = lambda path: None,
        max_models: int = MAX_MODELS,
    ) -> None:
        self.hostname = hostname
        self.versioned = versioned  # (model, version) of a path naming a version
        self.max_models = max_models
        self.by_status_class = dict.fromkeys(STATUS_CLASSES, 0)
        self._models: OrderedDict[tuple[str, str], list[float]] = OrderedDict()

    def record(self, exchange: Exchange) -> None:
        status_class = f"{exchange.status // 100}XX"
        if status_class in self.by_status_class:
            self.by_status_class[status_class] += 1
        if exchange.invocation and exchange.model and exchange.error not in UNCOUNTED_ERRORS:
            self._count(exchange.model, exchange)

    def takes(self, models: set[str]) -> bool:
        labelled = {self._labels(model) for model in models}
        return fits(labelled, self._models, self.max_models)

    def _labels(self, path: str) -> tuple[str, str]:
        """TorchServe's model_name and model_version for a request's model path."""
        return self.versioned(path) or (path, DEFAULT_VERSION)

    def record_hits(self, hits: Hits) -> None:
        """As `record` each hit, a model at a time; `takes` first."""
        self.by_status_class["2XX"] += len(hits.models)
        places = places_by(hits.models)
        for model, _ in hits.last_places():
            labels = self._labels(model)
            sums = self._models.pop(labels, None) or [0, 0.0, 0.0]
            sums[0] += len(places[model])
            latency = sums[1]
            for duration_s in at(hits.durations_s, places[model]):
                latency += duration_s * 1e6
            sums[1] = latency  # and a queue of 0 µs each
            self._models[labels] = sums

    def _count(self, model: str, exchange: Exchange) -> None:
        labels = self._labels(model)
        sums = self._models.pop(labels, None) or [0, 0.0, 0.0]
        sums[0] += 1
        if exchange.status < 400:  # TorchServe times the answered ones
            sums[1] += exchange.duration_s * 1e6
            sums[2] += exchange.timings_ms.get("queue", 0.0) * 1000
        self._models[labels] = sums
        if len(self._models) > self.max_models:
            self._models.popitem(last=False)

    def render(self, names: Iterable[str] = ()) -> bytes:
        """The series as Prometheus text; with `names`, only those."""
        wanted = set(names)
        lines: list[str] = []
        for status_class, count in self.by_status_class.items():
            name = f"Requests{status_class}"
            if not wanted or name in wanted:
                labels = f'Level="Host",Hostname="{_escaped(self.hostname)}"'
                lines += _family(name, "Count", [f"{name}{{{labels}}} {float(count)}"])
        for name, (unit, index) in MODEL_SERIES.items():
            if not wanted or name in wanted:
                lines += _family(name, unit, self._samples(name, index))
        return "".join(line + "\n" for line in lines).encode()

    def _samples(self, name: str, index: int) -> list[str]:
        host = _escaped(self.hostname)
        return [
            f'{name}{{model_name="{_escaped(model)}",model_version="{_escaped(version)}",'
            f'hostname="{host}"}} {float(sums[index])}'
            for (model, version), sums in self._models.items()
        ]


def _family(name: str, unit: str, samples: list[str]) -> list[str]:
    help_line = f"# HELP {name} Torchserve prometheus counter metric with unit: {unit}"
    return [help_line, f"# TYPE {name} counter", *samples]


def _escaped(value: str) -> str:
    """A label value as Prometheus text writes it."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
