"""Per-tenant figures for `GET /tenants`: requests, latency, worker time and refusals.

A tenant rule may name a tenant per token or per model folder, so the table is a capped LRU, like
`ModelUsage`'s, with a sorted index of its names for pages by cursor.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import Counter, OrderedDict
from functools import reduce
from itertools import repeat
from operator import add, attrgetter, methodcaller, truediv
from typing import Any

from sortedcontainers import SortedList

from modelhost.observe.exchange import Exchange, error_reason
from modelhost.observe.metrics import SECONDS_BUCKETS

MAX_TENANTS = 4096
ENTRY_BYTES = 1024  # an entry with a few refusal reasons, as tracemalloc measures it
QUANTILES = (0.5, 0.99)
_duration_s = attrgetter("duration_s")
_timings_ms = attrgetter("timings_ms")
_infer_ms = methodcaller("get", "infer", 0.0)  # worker_seconds's, in C
_status = attrgetter("status")


class TenantFigures:
    """One tenant's totals since the table first (or last) took it in."""

    __slots__ = (
        "requests",
        "errors",
        "worker_s",
        "latency_s",
        "buckets",
        "rejections",
        "evictions_suffered",
        "evictions_caused",
        "loads",
        "load_s",
    )

    def __init__(self) -> None:
        self.requests = self.errors = 0
        self.evictions_suffered = self.evictions_caused = self.loads = 0
        self.load_s = 0.0  # its models' loads, in the workers
        self.worker_s = self.latency_s = 0.0
        self.buckets = array("L", bytes(array("L").itemsize * (len(SECONDS_BUCKETS) + 1)))
        self.rejections: dict[str, int] | None = None  # by reason; None until the first

    def add(self, exchange: Exchange) -> None:
        self.requests += 1
        self.worker_s += exchange.timings_ms.get("infer", 0.0) / 1000  # worker_seconds, inlined
        self.latency_s += exchange.duration_s
        self.buckets[bisect_left(SECONDS_BUCKETS, exchange.duration_s)] += 1
        if exchange.status >= 400:
            self._refused(exchange)

    def add_all(self, exchanges: list[Exchange]) -> None:
        """`add` each of `exchanges`: one call for a tenant's run of them, looping in C."""
        if len(exchanges) == 1:  # cheaper than the loops' set-up
            return self.add(exchanges[0])
        durations = list(map(_duration_s, exchanges))
        self.requests += len(exchanges)
        # summed in order from the totals, as `add` would: the same floats to the last bit
        worker_s = map(truediv, map(_infer_ms, map(_timings_ms, exchanges)), repeat(1000))
        self.worker_s = reduce(add, worker_s, self.worker_s)
        self.latency_s = reduce(add, durations, self.latency_s)
        buckets = self.buckets
        for bucket, count in Counter(map(bisect_left, repeat(SECONDS_BUCKETS), durations)).items():
            buckets[bucket] += count
        if max(map(_status, exchanges), default=0) >= 400:
            for exchange in exchanges:
                if exchange.status >= 400:
                    self._refused(exchange)

    def _refused(self, exchange: Exchange) -> None:
        self.errors += 1
        reason = error_reason(exchange.status, exchange.error)
        self.rejections = self.rejections or {}
        self.rejections[reason] = self.rejections.get(reason, 0) + 1

    def merge(self, other: TenantFigures) -> None:
        """Add `other`'s figures to these."""
        self.requests += other.requests
        self.errors += other.errors
        self.worker_s += other.worker_s
        self.latency_s += other.latency_s
        for bucket, count in enumerate(other.buckets):
            self.buckets[bucket] += count
        for reason, count in (other.rejections or {}).items():
            self.rejections = self.rejections or {}
            self.rejections[reason] = self.rejections.get(reason, 0) + count
        self.evictions_suffered += other.evictions_suffered
        self.evictions_caused += other.evictions_caused
        self.loads += other.loads
        self.load_s += other.load_s

    def describe(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "errors": self.errors,
            "workerSeconds": round(self.worker_s, 6),
            "latencyMs": self.latency_ms(),
            "rejections": dict(sorted((self.rejections or {}).items())),
            "evictionsSuffered": self.evictions_suffered,
            "evictionsCaused": self.evictions_caused,
            "loads": self.loads,
            "loadSeconds": round(self.load_s, 6),
        }

    def latency_ms(self) -> dict[str, float]:
        """The mean, and each quantile as the bound of the bucket it falls in."""
        if not self.requests:
            return {}
        latency = {"mean": round(1000 * self.latency_s / self.requests, 3)}
        for quantile in QUANTILES:
            latency[f"p{round(quantile * 100)}"] = 1000 * self._bound(quantile)
        return latency

    def _bound(self, quantile: float) -> float:
        wanted, running = quantile * self.requests, 0
        for bound, count in zip(SECONDS_BUCKETS, self.buckets, strict=False):
            running += count
            if running >= wanted:
                return bound
        return float("inf")


def worker_seconds(exchange: Exchange) -> float:
    """The time a worker spent on the request: its Server-Timing `infer` part."""
    return exchange.timings_ms.get("infer", 0.0) / 1000


class TenantTable:
    def __init__(self, max_tenants: int = MAX_TENANTS) -> None:
        self.max_tenants = max_tenants
        self._figures: OrderedDict[str, TenantFigures] = OrderedDict()
        self._names = SortedList()
        self._newest_name: str | None = None  # the end of `_figures`, whose order needs no move
        self._newest_figures = TenantFigures()

    def __len__(self) -> int:
        return len(self._figures)

    def record(self, tenant: str, exchange: Exchange) -> TenantFigures:
        """Add the exchange to `tenant`'s figures, making it the newest; the oldest may go."""
        figures = self.figures_of(tenant)
        figures.add(exchange)
        return figures

    def figures_of(self, tenant: str) -> TenantFigures:
        """`tenant`'s figures, made the newest; the oldest may go."""
        # one tenant's requests after another's, the common case, need no move
        return self._newest_figures if tenant == self._newest_name else self._newest(tenant)

    def evicted(self, tenant: str, for_tenant: str) -> None:
        """A model of `tenant` was evicted for a load of `for_tenant` ("": for none)."""
        if tenant:
            self._newest(tenant).evictions_suffered += 1
        if for_tenant:
            self._newest(for_tenant).evictions_caused += 1

    def loaded(self, tenant: str, seconds: float) -> None:
        figures = self._newest(tenant)
        figures.loads += 1
        figures.load_s += seconds

    def _newest(self, tenant: str) -> TenantFigures:
        figures = self._figures.get(tenant)
        if figures is None:
            figures = self._figures[tenant] = TenantFigures()
            self._names.add(tenant)
            if len(self._figures) > self.max_tenants:
                self._names.remove(self._figures.popitem(last=False)[0])
        else:
            self._figures.move_to_end(tenant)
        self._newest_name, self._newest_figures = tenant, figures
        return figures

    def get(self, tenant: str) -> TenantFigures | None:
        return self._figures.get(tenant)

    def page(self, after: str, limit: int) -> list[str]:
        """Up to `limit` tenants after `after`, in name order."""
        names = self._names.irange(minimum=after, inclusive=(False, True))
        return [name for name, _ in zip(names, range(limit), strict=False)]
