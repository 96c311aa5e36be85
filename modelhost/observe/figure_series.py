"""Prometheus families read from per-label `TenantFigures`, when scraped.

A request adds to one label's figures (a count, two sums and a bucket) instead of updating a
counter, a histogram and a second counter in turn: the figures are the series, and a scrape
turns them into families.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client.metrics_core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from modelhost.observe.metrics import SECONDS_BUCKETS
from modelhost.observe.tallies import Labels
from modelhost.observe.tenants import TenantFigures

LES = [*(floatToGoString(bound) for bound in SECONDS_BUCKETS), "+Inf"]  # type: ignore[no-untyped-call]


class LabelFigures:
    """Each label's figures, and when its series began (a counter's `_created`)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock
        self.figures: dict[str, TenantFigures] = {}
        self.created: dict[str, float] = {}

    def of(self, label: str) -> TenantFigures:
        figures = self.figures.get(label)
        if figures is None:
            figures = self.figures[label] = TenantFigures()
            self.created[label] = self.clock()
        return figures

    def adopt(self, label: str, figures: TenantFigures) -> None:
        """Take `figures`, which hold only what `label` has done, as its series' from now on."""
        self.figures[label] = figures
        self.created[label] = self.clock()

    def fold(self, label: str, into: str) -> None:
        """Add a label's figures to another's, which keeps them from then on."""
        figures = self.figures.pop(label, None)
        if figures is not None:
            del self.created[label]
            self.of(into).merge(figures)


class FiguresCounter:
    """A counter family with one series a label, each read from its figures."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labels: LabelFigures,
        read: Callable[[TenantFigures], float],
    ) -> None:
        self.name, self.documentation, self.labels, self.read = name, documentation, labels, read

    @property
    def values(self) -> dict[Labels, float]:
        return {(label,): float(self.read(f)) for label, f in self.labels.figures.items()}

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=["tenant"])
        created = self.labels.created
        for (label,), value in self.values.items():
            family.add_metric([label], value, created=created[label])
        return family


class FiguresRejections:
    """Error responses by label and the error's type, from each label's figures."""

    def __init__(self, name: str, documentation: str, labels: LabelFigures) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels

    @property
    def values(self) -> dict[Labels, float]:
        return {
            (label, reason): float(count)
            for label, figures in self.labels.figures.items()
            for reason, count in (figures.rejections or {}).items()
        }

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=["tenant", "reason"])
        created = self.labels.created
        for labels, value in self.values.items():
            family.add_metric(list(labels), value, created=created[labels[0]])
        return family


class FiguresHistogram:
    """The latency histogram, a series a label, from each label's buckets."""

    def __init__(self, name: str, documentation: str, labels: LabelFigures) -> None:
        self.name, self.documentation, self.labels = name, documentation, labels

    @property
    def counts(self) -> dict[Labels, list[int]]:
        """Per bucket, not cumulative; +Inf last."""
        return {(label,): list(f.buckets) for label, f in self.labels.figures.items()}

    def family(self) -> Metric:
        family = HistogramMetricFamily(self.name, self.documentation, labels=["tenant"])
        for label, figures in list(self.labels.figures.items()):
            cumulative, running = [], 0
            for le, count in zip(LES, figures.buckets, strict=True):
                running += count
                cumulative.append((le, float(running)))
            family.add_metric([label], cumulative, figures.latency_s)
        return family
