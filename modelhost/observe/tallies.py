"""Counters and histograms kept as plain numbers, turned into Prometheus families when scraped.

prometheus_client takes a lock and makes three calls for each update, and every invocation makes
sixteen (its count, bytes in and out, the latency histogram, the tier, four latency parts): in
the warm invocation path that was the largest single cost, 8 of 38 µs (docs/performance.md).
The exchanges that feed these tallies are all told on the event loop's thread, so a tally is a
dict of numbers; a scrape, on the same thread, reads it into the registry through `Tallies`.
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

Labels = tuple[str, ...]


class CounterTally:
    """A labelled counter: `inc((label values), amount)`."""

    def __init__(self, name: str, documentation: str, labels: Sequence[str]) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.values: dict[Labels, float] = {}
        self.created: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        value = self.values.get(labels)
        if value is None:
            self.created[labels] = time.time()
            value = 0.0
        self.values[labels] = value + amount

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, value in list(self.values.items()):
            family.add_metric(labels, value, created=self.created[labels])
        return family


class HistogramTally:
    """A labelled histogram over fixed bucket bounds: `observe((label values), value)`."""

    def __init__(
        self, name: str, documentation: str, labels: Sequence[str], bounds: Sequence[float]
    ) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels
        self.bounds = tuple(bounds)
        # the `le` labels as prometheus_client writes them
        les = [floatToGoString(bound) for bound in self.bounds]  # type: ignore[no-untyped-call]
        self.les = [*les, "+Inf"]
        self.counts: dict[Labels, list[int]] = {}  # per bucket, not cumulative; +Inf last
        self.sums: dict[Labels, float] = {}

    def observe(self, labels: Labels, value: float) -> None:
        counts = self.counts.get(labels)
        if counts is None:
            counts = self.counts[labels] = [0] * (len(self.bounds) + 1)
            self.sums[labels] = 0.0
        counts[bisect_left(self.bounds, value)] += 1  # the first bound at or above it: le
        self.sums[labels] += value

    def family(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labels)
        for labels, counts in list(self.counts.items()):
            cumulative, running = [], 0
            for le, count in zip(self.les, counts, strict=True):
                running += count
                cumulative.append((le, float(running)))
            family.add_metric(labels, cumulative, self.sums[labels])
        return family


class LevelTally:
    """A level moved up and down (requests in flight); a gauge's function reads `value`."""

    def __init__(self) -> None:
        self.value = 0

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1


class Tallies(Collector):
    """The tallies of one registry, collected with its other metrics."""

    def __init__(self, registry: CollectorRegistry, *tallies: CounterTally | HistogramTally):
        self.tallies = tallies
        registry.register(self)

    def collect(self) -> Iterator[Metric]:
        for tally in self.tallies:
            yield tally.family()
