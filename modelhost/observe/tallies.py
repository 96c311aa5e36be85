"""Counters and histograms as plain numbers, turned into Prometheus families when scraped.

prometheus_client locks on each update, a large cost on the warm path (docs/decisions.md,
"What one request costs"). Updates and scrapes all run on the event loop's thread, so no lock.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import partial, reduce
from operator import add
from typing import Protocol

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

Labels = tuple[str, ...]


class Tally(Protocol):
    """Anything that turns its figures into one family when scraped."""

    def family(self) -> Metric: ...


class CounterTally:
    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.values: dict[Labels, float] = {}
        self.created: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0, at: float | None = None) -> None:
        """Add `amount`; a new series was created `at` (None: now)."""
        value = self.values.get(labels)
        if value is None:
            self.created[labels] = time.time() if at is None else at
            value = 0.0
        self.values[labels] = value + amount

    def fold(self, labels: Labels, into: Labels) -> None:
        """Move a series' count into another's, which keeps it from then on."""
        value = self.values.pop(labels, None)
        if value is not None:
            self.created.pop(labels)
            self.inc(into, value)

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value, created=self.created[labels])
        return family


class HistogramTally:
    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], bounds: Sequence[float]
    ) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.bounds = tuple(bounds)
        self._bucket = partial(bisect_left, self.bounds)  # the first bound at or above a value
        les = [floatToGoString(bound) for bound in self.bounds]  # type: ignore[no-untyped-call]
        self.les = [*les, "+Inf"]
        # per bucket, not cumulative, +Inf last; then the sum: one lookup a value
        self.counts: dict[Labels, list[float]] = {}

    def observe(self, labels: Labels, value: float) -> None:
        counts = self.counts.get(labels) or self._new(labels)
        counts[bisect_left(self.bounds, value)] += 1  # the first bound at or above it
        counts[-1] += value

    def observe_all(self, labels: Labels, values: Iterable[float]) -> None:
        """As `observe` each, in order: the same sum (added in turn, in C)."""
        values = list(values)
        counts = self.counts.get(labels) or self._new(labels)
        for bucket, count in Counter(map(self._bucket, values)).items():
            counts[bucket] += count
        counts[-1] = reduce(add, values, counts[-1])

    def _new(self, labels: Labels) -> list[float]:
        counts: list[float] = [0] * (len(self.bounds) + 1) + [0.0]
        self.counts[labels] = counts
        return counts

    def family(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, counts in list(self.counts.items()):
            cumulative, running = [], 0.0
            for le, count in zip(self.les, counts[:-1], strict=True):
                running += count
                cumulative.append((le, float(running)))
            family.add_metric(labels, cumulative, counts[-1])
        return family


class LevelTally:
    """A level a gauge's function reads (requests in flight)."""

    def __init__(self) -> None:
        self.value = 0

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def add(self, count: int) -> None:
        self.value += count


class GaugeReading:
    """A gauge's series, read from a function when scraped."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: Sequence[str],
        read: Callable[[], dict[Labels, float]],
    ) -> None:
        self.name, self.documentation, self.labels, self.read = name, documentation, labels, read

    def family(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, value in self.read().items():
            family.add_metric(labels, value)
        return family


class Tallies(Collector):
    """`before`: called at each scrape before the tallies are read (what they hold back)."""

    def __init__(
        self,
        registry: CollectorRegistry,
        tallies: Sequence[Tally],
        before: Callable[[], None] = lambda: None,
    ) -> None:
        self.tallies = tuple(tallies)
        self.before = before
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        self.before()
        for tally in self.tallies:
            yield tally.family()
