"""Prometheus metrics, named ``modelhost_*``, in a registry of their own per server.

Counters and histograms are fed by what already happens (events, REST requests, gRPC calls),
never by probes in the core. Gauges are read when scraped (`modelhost.observe.collector`).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from operator import attrgetter, itemgetter, truediv

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from modelhost.observe.exchange import INVOCATION_PARTS, Exchange, error_reason
from modelhost.observe.hits import Hits, at, places_by
from modelhost.observe.loop_watch import STALL_S
from modelhost.observe.tallies import CounterTally, HistogramTally, LevelTally, Tallies
from modelhost.records.events import Event
from modelhost.records.held import Held

# from a 1 ms cache hit to a two-minute download
SECONDS_BUCKETS = (
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0
)  # fmt: skip

# every label comes from a closed set: a method a client invents is "other", not a new series
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})
# read in C, a held hit at a time
SERIES = attrgetter("method", "route", "status", "protocol")
DURATION, TIMINGS = attrgetter("duration_s"), attrgetter("timings_ms")
BYTES_IN, BYTES_OUT = attrgetter("bytes_in"), attrgetter("bytes_out")


def _histogram(name: str, help_text: str, registry: CollectorRegistry, *labels: str) -> Histogram:
    return Histogram(name, help_text, labels, registry=registry, buckets=SECONDS_BUCKETS)


class Metrics:
    """The counters and histograms; `on_event` and `on_exchange` feed them."""

    def __init__(self, registry: CollectorRegistry) -> None:
        r = self.registry = registry
        self.lookups = CounterTally(
            "modelhost_cache_lookups",
            "Invocations by where their model was found: hit (in memory, SageMaker's "
            "ModelCacheHit), disk (loaded from the disk tier) or remote (downloaded first)",
            ["tier"],
        )
        self.load_seconds = _histogram(
            "modelhost_model_load_seconds", "Time to load a model into a worker", r
        )
        self.unload_seconds = _histogram(
            "modelhost_model_unload_seconds", "Time to unload a model, evictions included", r
        )
        self.download_seconds = _histogram(
            "modelhost_model_download_seconds", "Time to download an artifact from the store", r
        )
        self.unpack_seconds = _histogram(
            "modelhost_model_unpack_seconds", "Time to unpack an archive into the disk tier", r
        )
        self.load_wait_seconds = _histogram(
            "modelhost_model_load_wait_seconds",
            "Time an invocation waited for its model to be downloaded and loaded (misses only)",
            r,
        )
        self.download_bytes = Counter(
            "modelhost_model_download_bytes", "Bytes downloaded from the store", registry=r
        )
        self.unloads = Counter(
            "modelhost_model_unloads",
            "Models that left memory, by reason (the eviction policy, memory_pressure, "
            "tenant_apart, requested, worker_died)",
            ["reason"],
            registry=r,
        )
        self.evictions = Counter(
            "modelhost_evictions",
            "Models the cache unloaded to make room, by reason",
            ["reason"],
            registry=r,
        )
        self.deletions = Counter(
            "modelhost_disk_deletions",
            "Artifacts deleted from the disk tier, by reason",
            ["reason"],
            registry=r,
        )
        self.failures = Counter(
            "modelhost_failures",
            "Failed loads and other failures, by reason",
            ["reason"],
            registry=r,
        )
        self.worker_restarts = Counter(
            "modelhost_worker_restarts",
            "Worker processes that exited and were replaced, by reason",
            ["reason"],
            registry=r,
        )
        self.front_restarts = Counter(
            "modelhost_front_restarts",
            "Front processes (--fronts) that exited while serving and were started again, by "
            "reason (signal, exit)",
            ["reason"],
            registry=r,
        )
        self.requests = CounterTally(
            "modelhost_http_requests",
            "Requests by method, route template, status and protocol (rest, grpc)",
            ["method", "route", "status", "protocol"],
        )
        self.request_seconds = HistogramTally(
            "modelhost_http_request_duration_seconds",
            "Request latency by method, route template, status and protocol (rest, grpc)",
            ["method", "route", "status", "protocol"],
            SECONDS_BUCKETS,
        )
        self.request_bytes = CounterTally(
            "modelhost_http_request_bytes",
            "Request body bytes by route and protocol",
            ["route", "protocol"],
        )
        self.response_bytes = CounterTally(
            "modelhost_http_response_bytes",
            "Response body bytes by route and protocol",
            ["route", "protocol"],
        )
        self.in_flight = LevelTally()
        Gauge(
            "modelhost_http_requests_in_flight",
            "Requests and gRPC calls received and not yet answered (queued or running)",
            registry=r,
        ).set_function(lambda: self.in_flight.value)
        self.invocation_seconds = HistogramTally(
            "modelhost_invocation_part_seconds",
            "Parts of invocation latency (queue, download, load, infer) as in Server-Timing",
            ["part"],
            SECONDS_BUCKETS,
        )
        # fed by every request: plain numbers, not locked metrics (see observe.tallies)
        Tallies(
            r,
            (
                self.lookups,
                self.requests,
                self.request_seconds,
                self.request_bytes,
                self.response_bytes,
                self.invocation_seconds,
            ),
            before=self.fold,
        )
        # held, then counted together (docs/decisions.md)
        self._hits: Held[Exchange] = Held(self._count_hits)
        self.rejections = Counter(
            "modelhost_rejections",
            "Error responses by the error's type (e.g. InsufficientMemory, ModelNotFound)",
            ["reason"],
            registry=r,
        )
        self.grpc_refusals = Counter(
            "modelhost_grpc_refusals",
            "gRPC connections the ports' guards refused: past --grpc-max-connections "
            "(connections) or --grpc-connections-per-s from one address (rate), closed at once; "
            "past an HTTP/2 limit (goaway)",
            ["reason"],
            registry=r,
        )
        self.unhandled_errors = Counter(
            "modelhost_unhandled_errors",
            "Requests answered 500 by the last-resort handler: an exception no route translated "
            "(a bug; the log has its traceback under the response's X-Request-Id)",
            registry=r,
        )
        self.loop_stalls = Counter(
            "modelhost_event_loop_stalls",
            f"Times the frontend's event loop ran nothing for {STALL_S:g} s: no request was "
            "answered meanwhile (a bug; the log has the stack it was stuck at)",
            registry=r,
        )
        self._by_kind: dict[str, Callable[[Event], None]] = {
            "load": self._loaded,
            "unload": self._unloaded,
            "evict": self._evicted,
            "delete": lambda e: self.deletions.labels(e.reason or "unknown").inc(),
            "download": self._downloaded,
            "unpack": lambda e: _observe_ms(self.unpack_seconds, e.duration_ms),
            "failure": lambda e: self.failures.labels(e.reason or "unknown").inc(),
            "worker_exit": lambda e: self.worker_restarts.labels(e.reason or "unknown").inc(),
            "front_exit": lambda e: self.front_restarts.labels(e.reason or "unknown").inc(),
        }

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric in the registry."""
        return generate_latest(self.registry)

    # events -----------------------------------------------------------------------------

    def on_event(self, event: Event) -> None:
        record = self._by_kind.get(event.kind)
        if record is not None:
            record(event)

    def _loaded(self, event: Event) -> None:
        _observe_ms(self.load_seconds, event.duration_ms)

    def _unloaded(self, event: Event) -> None:
        _observe_ms(self.unload_seconds, event.duration_ms)
        self.unloads.labels(event.reason or "unknown").inc()

    def _evicted(self, event: Event) -> None:
        self._unloaded(event)
        self.evictions.labels(event.reason or "unknown").inc()

    def _downloaded(self, event: Event) -> None:
        _observe_ms(self.download_seconds, event.duration_ms)
        self.download_bytes.inc(event.bytes or 0)

    # HTTP exchanges ---------------------------------------------------------------------

    def on_exchange(self, exchange: Exchange) -> None:
        if exchange.cache == "hit" and exchange.status < 400:  # a hit touches only the tallies
            self._hits.add(exchange)
        else:
            self.fold()  # in the order answered
            self._count(exchange)

    def on_hits(self, hits: Hits) -> None:
        """As `on_exchange` each hit, a route at a time."""
        self.fold()  # in the order answered
        for route, places in places_by(hits.routes).items():
            ended, series = hits.ended(places[0]), ("POST", route, "200", "rest")
            self.requests.inc(series, len(places), ended)
            self.request_seconds.observe_all(series, at(hits.durations_s, places))
            bytes_in, bytes_out = hits.bytes_at(places)
            self.request_bytes.inc((route, "rest"), bytes_in, ended)
            self.response_bytes.inc((route, "rest"), bytes_out, ended)
        count = len(hits.routes)
        self.lookups.inc(("hit",), count, hits.ended(0))
        for part in INVOCATION_PARTS[:-1]:
            self.invocation_seconds.observe_all((part,), itertools.repeat(0.0, count))
        self.invocation_seconds.observe_all(("infer",), [ms / 1000 for ms in hits.infer_ms])

    def fold(self) -> None:
        """Count the hits held since the last fold; the tallies' scrape folds first."""
        self._hits.fold()

    def _count_hits(self, hits: list[Exchange]) -> None:
        """As `_count` each held hit, a series and a part at a time: the same counts and sums."""
        for (method, route, status, protocol), places in places_by(list(map(SERIES, hits))).items():
            group = at(hits, places)
            ended, route_series = _ended(group[0]), (route, protocol)
            series = (method if method in HTTP_METHODS else "other", route, str(status), protocol)
            self.requests.inc(series, len(group), ended)
            self.request_seconds.observe_all(series, map(DURATION, group))
            self.request_bytes.inc(route_series, sum(map(BYTES_IN, group)), ended)
            self.response_bytes.inc(route_series, sum(map(BYTES_OUT, group)), ended)
        self.lookups.inc(("hit",), len(hits), _ended(hits[0]))
        for part, values_ms in _columns(list(map(TIMINGS, hits))).items():
            seconds = map(truediv, values_ms, itertools.repeat(1000.0))
            self.invocation_seconds.observe_all((part,), seconds)

    def _count(self, exchange: Exchange, ended: float | None = None) -> None:
        """Count the exchange; `ended`: when it was answered, for a new series (None: now)."""
        route = (exchange.route, exchange.protocol)
        method = exchange.method if exchange.method in HTTP_METHODS else "other"
        series = (method, exchange.route, str(exchange.status), exchange.protocol)
        self.requests.inc(series, 1.0, ended)
        self.request_seconds.observe(series, exchange.duration_s)
        self.request_bytes.inc(route, exchange.bytes_in, ended)
        self.response_bytes.inc(route, exchange.bytes_out, ended)
        if exchange.status >= 400:
            self.rejections.labels(error_reason(exchange.status, exchange.error)).inc()
        if exchange.cache:
            self._invoked(exchange, ended)

    def _invoked(self, exchange: Exchange, ended: float | None) -> None:
        assert exchange.cache is not None
        self.lookups.inc((exchange.cache,), 1.0, ended)
        for part, ms in exchange.timings_ms.items():
            self.invocation_seconds.observe((part,), ms / 1000)
        if exchange.cache != "hit":
            self.load_wait_seconds.observe(exchange.load_wait_ms / 1000)


def _ended(exchange: Exchange) -> float:
    return exchange.time + exchange.duration_s


def _columns(timings: list[dict[str, float]]) -> dict[str, list[float]]:
    """Each part's values in order, where given."""
    if len(set(map(tuple, timings))) == 1:  # the same parts in each: one pass in C a part
        return {part: list(map(itemgetter(part), timings)) for part in timings[0]}
    columns: dict[str, list[float]] = {}
    for each in timings:
        for part, ms in each.items():
            columns.setdefault(part, []).append(ms)
    return columns


def _observe_ms(histogram: Histogram, duration_ms: float | None) -> None:
    if duration_ms is not None:
        histogram.observe(duration_ms / 1000)
