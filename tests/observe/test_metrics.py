"""Counters and histograms agree with the events and exchanges fed to them."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from modelhost.observe.exchange import Exchange
from modelhost.observe.metrics import Metrics
from modelhost.records.events import EventLog
from modelhost.records.held import FOLD_AFTER


@pytest.fixture
def fed() -> tuple[Metrics, EventLog]:
    metrics, log = Metrics(CollectorRegistry()), EventLog()
    log.subscribe(metrics.on_event)
    return metrics, log


def value(metrics: Metrics, name: str, **labels: str) -> float:
    sample = metrics.registry.get_sample_value(name, labels)
    return 0.0 if sample is None else sample


def invocation(cache: str | None, status: int = 200, **timings_ms: float) -> Exchange:
    return Exchange(
        time=0.0,
        method="POST",
        route="/models/{model:path}/invoke",
        status=status,
        duration_s=0.01,
        bytes_in=17,
        bytes_out=20,
        invocation=True,
        model="m",
        cache=cache,
        timings_ms=timings_ms,
        error="InsufficientMemory" if status == 507 else None,
    )


def test_a_download_event_feeds_the_download_histogram_and_bytes(
    fed: tuple[Metrics, EventLog],
) -> None:
    metrics, log = fed
    log.emit("download", "t/a.tar.gz", bytes=3_000_000, duration_ms=1500.0, reason="s3")
    assert value(metrics, "modelhost_model_download_seconds_count") == 1
    assert value(metrics, "modelhost_model_download_seconds_sum") == pytest.approx(1.5)
    assert value(metrics, "modelhost_model_download_seconds_bucket", le="2.5") == 1
    assert value(metrics, "modelhost_model_download_seconds_bucket", le="1.0") == 0
    assert value(metrics, "modelhost_model_download_bytes_total") == 3_000_000


def test_loads_unloads_evictions_deletions_failures_and_restarts_are_counted(
    fed: tuple[Metrics, EventLog],
) -> None:
    metrics, log = fed
    log.emit("load", "a", bytes=10, duration_ms=20.0)
    log.emit("load", "b", bytes=10, duration_ms=30.0)
    log.emit("evict", "a", reason="lru", duration_ms=2.0)
    log.emit("unload", "b", reason="requested", duration_ms=3.0)
    log.emit("delete", "a", reason="disk_budget")
    log.emit("failure", "c", reason="load")
    log.emit("worker_exit", worker=1, reason="died")
    log.emit("budget", reason="start")  # no metric of its own: the gauges read the budgets
    assert value(metrics, "modelhost_model_load_seconds_count") == 2
    assert value(metrics, "modelhost_model_load_seconds_sum") == pytest.approx(0.05)
    assert value(metrics, "modelhost_model_unload_seconds_count") == 2
    assert value(metrics, "modelhost_evictions_total", reason="lru") == 1
    assert value(metrics, "modelhost_model_unloads_total", reason="lru") == 1
    assert value(metrics, "modelhost_model_unloads_total", reason="requested") == 1
    assert value(metrics, "modelhost_disk_deletions_total", reason="disk_budget") == 1
    assert value(metrics, "modelhost_failures_total", reason="load") == 1
    assert value(metrics, "modelhost_worker_restarts_total", reason="died") == 1


def test_hits_and_misses_by_tier() -> None:
    """Hits and misses are counted by tier and misses wait for their load."""
    metrics = Metrics(CollectorRegistry())
    for _ in range(3):
        metrics.on_exchange(invocation("hit", queue=0.01, load=0.0, infer=1.0))
    metrics.on_exchange(invocation("disk", queue=0.01, load=40.0, infer=1.0))
    metrics.on_exchange(invocation("remote", download=900.0, load=60.0, infer=1.0))
    assert value(metrics, "modelhost_cache_lookups_total", tier="hit") == 3
    assert value(metrics, "modelhost_cache_lookups_total", tier="disk") == 1
    assert value(metrics, "modelhost_cache_lookups_total", tier="remote") == 1
    assert value(metrics, "modelhost_model_load_wait_seconds_count") == 2
    assert value(metrics, "modelhost_model_load_wait_seconds_sum") == pytest.approx(1.0)
    assert value(metrics, "modelhost_invocation_part_seconds_count", part="infer") == 5
    assert value(metrics, "modelhost_invocation_part_seconds_count", part="download") == 1


def test_requests_counted_by_route_and_status() -> None:
    """Requests, bytes and rejections are counted by route and status."""
    metrics = Metrics(CollectorRegistry())
    metrics.on_exchange(invocation("hit"))
    metrics.on_exchange(invocation(None, status=507))
    route = "/models/{model:path}/invoke"
    labels = {"method": "POST", "route": route, "protocol": "rest"}
    assert value(metrics, "modelhost_http_requests_total", status="200", **labels) == 1
    assert value(metrics, "modelhost_http_requests_total", status="507", **labels) == 1
    assert value(metrics, "modelhost_http_request_bytes_total", route=route, protocol="rest") == 34
    assert value(metrics, "modelhost_http_response_bytes_total", route=route, protocol="rest") == 40
    assert value(metrics, "modelhost_rejections_total", reason="InsufficientMemory") == 1
    assert value(metrics, "modelhost_cache_lookups_total", tier="hit") == 1  # the 507 found none


def test_made_up_methods_share_one_series() -> None:
    """Every label comes from a closed set: a scan of invented methods adds one series, not one
    per method."""
    metrics = Metrics(CollectorRegistry())
    for index in range(50):
        metrics.on_exchange(dataclasses.replace(invocation("hit"), method=f"M{index}"))
    metrics.on_exchange(dataclasses.replace(invocation("hit"), method="PATCH"))
    labels = {"route": "/models/{model:path}/invoke", "status": "200", "protocol": "rest"}
    assert value(metrics, "modelhost_http_requests_total", method="other", **labels) == 50
    assert value(metrics, "modelhost_http_requests_total", method="PATCH", **labels) == 1
    series = {
        sample.labels["method"]
        for family in metrics.registry.collect()
        if family.name == "modelhost_http_requests"
        for sample in family.samples
    }
    assert series == {"other", "PATCH"}


def test_grpc_calls_are_counted_apart_by_their_protocol() -> None:
    """A gRPC call and a REST request on one route are two series, told apart by `protocol`."""
    metrics = Metrics(CollectorRegistry())
    metrics.on_exchange(invocation("hit"))
    metrics.on_exchange(dataclasses.replace(invocation("hit"), protocol="grpc"))
    metrics.on_exchange(dataclasses.replace(invocation("hit"), protocol="grpc"))
    route = "/models/{model:path}/invoke"
    labels = {"method": "POST", "route": route, "status": "200"}
    for protocol, calls in (("rest", 1), ("grpc", 2)):
        series = {**labels, "protocol": protocol}
        bodies = {"route": route, "protocol": protocol}
        assert value(metrics, "modelhost_http_requests_total", **series) == calls
        assert value(metrics, "modelhost_http_request_duration_seconds_count", **series) == calls
        assert value(metrics, "modelhost_http_request_bytes_total", **bodies) == 17 * calls
        assert value(metrics, "modelhost_http_response_bytes_total", **bodies) == 20 * calls


def test_hits_counted_in_bulk_all_show_at_a_scrape() -> None:
    """Hits are counted together, a few dozen at a time; a scrape counts those held first."""
    metrics = Metrics(CollectorRegistry())
    for _ in range(FOLD_AFTER + 5):
        metrics.on_exchange(invocation("hit", queue=0.01, infer=1.0))
    labels = {"method": "POST", "route": "/models/{model:path}/invoke", "protocol": "rest"}
    assert value(metrics, "modelhost_http_requests_total", status="200", **labels) == FOLD_AFTER + 5
    assert value(metrics, "modelhost_cache_lookups_total", tier="hit") == FOLD_AFTER + 5
    assert value(metrics, "modelhost_invocation_part_seconds_count", part="infer") == FOLD_AFTER + 5
    metrics.on_exchange(invocation("hit"))
    assert value(metrics, "modelhost_cache_lookups_total", tier="hit") == FOLD_AFTER + 6


def test_a_series_first_counted_in_bulk_was_created_when_answered() -> None:
    """A hit's series is created at the hit's answer, not at the later count."""
    metrics = Metrics(CollectorRegistry())
    metrics.on_exchange(dataclasses.replace(invocation("hit"), time=1000.0, duration_s=0.5))
    assert value(metrics, "modelhost_cache_lookups_created", tier="hit") == 1000.5


def test_hits_held_are_counted_before_a_later_error() -> None:
    """A series that a held hit and a later error share is dated by the hit."""
    metrics = Metrics(CollectorRegistry())
    metrics.on_exchange(dataclasses.replace(invocation("hit"), time=1000.0, duration_s=0.5))
    metrics.on_exchange(invocation(None, status=507))
    route = {"route": "/models/{model:path}/invoke", "protocol": "rest"}
    assert value(metrics, "modelhost_http_request_bytes_created", **route) == 1000.5
    assert value(metrics, "modelhost_http_request_bytes_total", **route) == 34


HIT_TIMINGS = st.dictionaries(
    st.sampled_from(["queue", "download", "load", "infer", "device"]),
    st.floats(0, 200_000, allow_nan=False),
    max_size=5,
)
HELD_HITS = st.lists(
    st.builds(
        Exchange,
        time=st.floats(0, 2e9, allow_nan=False),
        method=st.sampled_from(["POST", "GET", "BREW"]),
        route=st.sampled_from(["/models/{model:path}/invoke", "/invocations"]),
        status=st.sampled_from([200, 201, 302]),
        duration_s=st.floats(0, 200, allow_nan=False),
        bytes_in=st.integers(0, 10**12),
        bytes_out=st.integers(0, 10**12),
        invocation=st.just(True),
        model=st.just("m"),
        cache=st.just("hit"),
        timings_ms=HIT_TIMINGS,
        protocol=st.sampled_from(["rest", "grpc"]),
    ),
    min_size=1,
    max_size=FOLD_AFTER + 10,
)


@given(HELD_HITS)
def test_hits_counted_in_bulk_show_what_counting_each_would(hits: list[Exchange]) -> None:
    """Held hits are counted a series and a part at a time: every sample, created times and
    sums to the last bit, is what counting each hit in turn gives."""
    bulk, each = Metrics(CollectorRegistry()), Metrics(CollectorRegistry())
    for exchange in hits:
        bulk.on_exchange(exchange)
        each._count(exchange, exchange.time + exchange.duration_s)
    assert all_samples(bulk) == all_samples(each)


def all_samples(metrics: Metrics) -> list[tuple[str, dict[str, str], float]]:
    """The tallies' samples (prometheus_client's own metrics are dated when made)."""
    metrics.fold()
    return [
        (sample.name, sample.labels, sample.value)
        for family in metrics.registry.collect()
        if family.name in TALLIED
        for sample in family.samples
    ]


TALLIED = {
    "modelhost_cache_lookups",
    "modelhost_http_requests",
    "modelhost_http_request_duration_seconds",
    "modelhost_http_request_bytes",
    "modelhost_http_response_bytes",
    "modelhost_invocation_part_seconds",
}
