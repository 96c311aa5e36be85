"""Per-tenant Prometheus series: the costliest tenants by name, every other one as `other`.

At most `named_max` tenants are named. A tenant displaces the cheapest named one only past it
by `SWAP_MARGIN`, so equals do not take turns; the displaced one's series fold into `other`
and the newcomer's start from nothing, so counters only grow and the series add up to every
request. Evictions and bytes held are counted under the same names (the server's own models,
tenant "", are `other`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from operator import attrgetter

from modelhost.observe.exchange import Exchange
from modelhost.observe.figure_series import (
    FiguresCounter,
    FiguresHistogram,
    FiguresRejections,
    LabelFigures,
)
from modelhost.observe.hits import at, by_last_place, places_by
from modelhost.observe.tallies import CounterTally, GaugeReading, Labels
from modelhost.observe.tenants import TenantFigures, TenantTable
from modelhost.records.statistics import TenantHoldings

OTHER = "other"
_tenant: Callable[[Exchange], str | None] = attrgetter("tenant")
NAMED_TENANTS = 20
SWAP_MARGIN = 1.25


class TenantSeries:
    """`holdings`: what each tenant holds now, read when scraped."""

    def __init__(
        self,
        named_max: int = NAMED_TENANTS,
        holdings: Callable[[], TenantHoldings] = TenantHoldings,
    ) -> None:
        self.named_max, self.holdings = named_max, holdings
        self.named: dict[str, float] = {}  # tenant → its worker seconds when last seen
        self._cheapest: str | None = None
        # a request adds to its label's figures, the four families below read them when scraped
        self.by_label = LabelFigures(time.time)
        self.requests = FiguresCounter(
            "modelhost_tenant_requests",
            "Requests by tenant (the costliest by name)",
            self.by_label,
            lambda figures: figures.requests,
        )
        self.request_seconds = FiguresHistogram(
            "modelhost_tenant_request_duration_seconds", "Request latency by tenant", self.by_label
        )
        self.worker_seconds = FiguresCounter(
            "modelhost_tenant_worker_seconds",
            "Worker time by tenant: the infer part of its requests' Server-Timing",
            self.by_label,
            lambda figures: figures.worker_s,
        )
        self.rejections = FiguresRejections(
            "modelhost_tenant_rejections",
            "Error responses by tenant and the error's type",
            self.by_label,
        )
        self.evictions_suffered = CounterTally(
            "modelhost_tenant_evictions_suffered",
            "Models of the tenant evicted from memory, for any load or memory pressure",
            ["tenant"],
        )
        self.evictions_caused = CounterTally(
            "modelhost_tenant_evictions_caused",
            "Models evicted from memory to make room for the tenant's loads",
            ["tenant"],
        )
        self.loads = CounterTally(
            "modelhost_tenant_loads", "Loads of the tenant's models into workers", ["tenant"]
        )
        self.load_seconds = CounterTally(
            "modelhost_tenant_load_seconds",
            "Worker time loading the tenant's models (the load events' durations)",
            ["tenant"],
        )
        # counted here by label, folded into `other` when a name goes
        self._counted = (
            self.evictions_suffered,
            self.evictions_caused,
            self.loads,
            self.load_seconds,
        )
        self.tallies = (
            self.requests,
            self.request_seconds,
            self.worker_seconds,
            self.rejections,
            *self._counted,
            GaugeReading(
                "modelhost_tenant_memory_bytes",
                "Memory the tenant's models hold, loads under way at their reservation",
                ["tenant"],
                lambda: self._held(self.holdings().memory_bytes),
            ),
            GaugeReading(
                "modelhost_tenant_disk_bytes",
                "Disk the tenant's cache entries hold",
                ["tenant"],
                lambda: self._held(self.holdings().disk_bytes),
            ),
        )

    def record(self, tenant: str, exchange: Exchange, figures: TenantFigures) -> None:
        """Count the exchange under `tenant`'s name or `other`; `figures`: the tenant's in the
        table, the exchange counted there already."""
        label = self._label(tenant, figures.worker_s)
        own = self.by_label.figures.get(label)
        if own is figures:
            return  # the table's are the series': counted once, there
        if own is None and label != OTHER and figures.requests == 1:
            # named at its first request in the table: its series and its figures are one
            self.by_label.adopt(label, figures)
            return
        (own or self.by_label.of(label)).add(exchange)

    def record_held(self, exchanges: list[Exchange], table: TenantTable) -> None:
        """`record_run` each tenant's, in the order of their last: the table ends as one by one
        where its cap forgets none on the way; the names may not."""
        for tenant, places in by_last_place(places_by(list(map(_tenant, exchanges)))):
            if tenant is not None:  # else no invocation's
                self.record_run(tenant, at(exchanges, places), table)

    def record_run(self, tenant: str, exchanges: list[Exchange], table: TenantTable) -> None:
        """Count a run of `tenant`'s exchanges into `table` and here, as `record` would each."""
        figures = table.figures_of(tenant)
        if tenant in self.named and self.by_label.figures.get(tenant) is figures:
            # its series are the table's figures: counted there, and its name's cost set once
            figures.add_all(exchanges)
            self._label(tenant, figures.worker_s)
            return
        for exchange in exchanges:
            figures.add(exchange)
            self.record(tenant, exchange, figures)

    def evicted(self, tenant: str, for_tenant: str) -> None:
        """A model of `tenant` was evicted, for a load of `for_tenant` ("": for none)."""
        if tenant:
            self.evictions_suffered.inc((self.label_of(tenant),))
        if for_tenant:
            self.evictions_caused.inc((self.label_of(for_tenant),))

    def loaded(self, tenant: str, seconds: float) -> None:
        labels = (self.label_of(tenant),)
        self.loads.inc(labels)
        self.load_seconds.inc(labels, seconds)

    def label_of(self, tenant: str) -> str:
        """The tenant's series, changing none of the names."""
        return tenant if tenant in self.named else OTHER

    def _held(self, by_tenant: dict[str, int]) -> dict[Labels, float]:
        held: Counter[Labels] = Counter()
        for tenant, held_bytes in by_tenant.items():
            held[(self.label_of(tenant),)] += held_bytes
        return {labels: float(value) for labels, value in held.items()}

    def _label(self, tenant: str, cost_s: float) -> str:
        if tenant in self.named:
            self.named[tenant] = cost_s
            if len(self.named) > 1 and (  # one named tenant stays the cheapest
                tenant == self._cheapest or cost_s < self.named[self._cheapest or tenant]
            ):
                self._find_cheapest()
            return tenant
        if tenant == OTHER:
            return OTHER
        if len(self.named) < self.named_max:
            return self._name(tenant, cost_s)
        cheapest = self._cheapest
        if cheapest is not None and cost_s > self.named[cheapest] * SWAP_MARGIN:
            self._unname(cheapest)
            return self._name(tenant, cost_s)
        return OTHER

    def _name(self, tenant: str, cost_s: float) -> str:
        self.named[tenant] = cost_s
        self._find_cheapest()
        return tenant

    def _unname(self, tenant: str) -> None:
        del self.named[tenant]
        self.by_label.fold(tenant, OTHER)
        for tally in self._counted:
            tally.fold((tenant,), (OTHER,))

    def _find_cheapest(self) -> None:
        """A scan of the named tenants, a fixed few, when the cheapest may have changed."""
        self._cheapest = min(self.named, key=self.named.__getitem__, default=None)
