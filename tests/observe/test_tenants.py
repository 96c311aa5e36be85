"""Per-tenant figures: the capped table behind GET /tenants, and the named-or-other series."""

from __future__ import annotations

import itertools
import operator
import tracemalloc

from hypothesis import given
from hypothesis import strategies as st

from modelhost.observe.exchange import Exchange
from modelhost.observe.figure_series import FiguresHistogram, LabelFigures
from modelhost.observe.tallies import CounterTally
from modelhost.observe.tenant_series import OTHER, TenantSeries
from modelhost.observe.tenants import ENTRY_BYTES, TenantTable
from modelhost.records.held import FOLD_AFTER
from modelhost.records.statistics import TenantHoldings

TENANT = operator.attrgetter("tenant")


def exchange(
    tenant: str = "t", infer_ms: float = 2.0, status: int = 200, duration_s: float = 0.004
) -> Exchange:
    return Exchange(
        time=0.0,
        method="POST",
        route="/models/{model:path}/invoke",
        status=status,
        duration_s=duration_s,
        bytes_in=1,
        bytes_out=1,
        invocation=True,
        model="m",
        cache="hit" if status < 400 else None,
        timings_ms={"queue": 0.1, "infer": infer_ms} if status < 400 else {},
        error={429: "QueueFull", 507: "InsufficientMemory"}.get(status),
        tenant=tenant,
    )


def feed(table: TenantTable, series: TenantSeries, *exchanges: Exchange) -> None:
    for each in exchanges:
        assert each.tenant is not None
        series.record(each.tenant, each, table.record(each.tenant, each))


def test_a_tenants_figures_add_up_its_requests() -> None:
    table = TenantTable()
    for each in (exchange(), exchange(infer_ms=6.0, duration_s=0.2), exchange(status=429)):
        table.record("t", each)
    figures = table.get("t")
    assert figures is not None
    assert figures.describe() == {
        "requests": 3,
        "errors": 1,
        "workerSeconds": 0.008,
        "latencyMs": {"mean": 69.333, "p50": 5.0, "p99": 250.0},
        "rejections": {"QueueFull": 1},
        "evictionsSuffered": 0,
        "evictionsCaused": 0,
        "loads": 0,
        "loadSeconds": 0.0,
    }


def test_the_table_forgets_the_least_recent_tenant_past_its_cap() -> None:
    table = TenantTable(max_tenants=3)
    for tenant in ("a", "b", "c", "a", "d"):
        table.record(tenant, exchange(tenant))
    assert len(table) == 3
    assert table.get("b") is None
    assert table.page("", 10) == ["a", "c", "d"]


def test_a_tenant_recorded_after_an_eviction_of_anothers_is_the_newest_again() -> None:
    """Evictions touch tenants too: a request of the tenant recorded just before one must still
    make it the newest, so the tenant the eviction touched goes first."""
    table = TenantTable(max_tenants=2)
    table.record("a", exchange("a"))
    table.record("a", exchange("a"))
    table.evicted("b", "")
    table.record("a", exchange("a"))
    table.record("c", exchange("c"))
    assert table.page("", 10) == ["a", "c"]


def test_pages_walk_the_tenants_in_name_order() -> None:
    table = TenantTable()
    for tenant in ("tenants/t2", "tenants/t0", "tenants/t1"):
        table.record(tenant, exchange(tenant))
    assert table.page("", 2) == ["tenants/t0", "tenants/t1"]
    assert table.page("tenants/t1", 2) == ["tenants/t2"]


def test_a_tenant_entry_stays_under_its_byte_cap() -> None:
    table = TenantTable()
    names = [f"tenants/t{i:05d}" for i in range(2000)]
    reasons = [exchange(status=429), exchange(status=507), exchange()]
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for name in names:
        for each in reasons:
            table.record(name, each)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert held / len(names) < ENTRY_BYTES


def test_the_costliest_tenant_takes_the_cheapest_named_ones_place() -> None:
    table, series = TenantTable(), TenantSeries(named_max=2)
    feed(table, series, exchange("a", 1.0), exchange("b", 2.0), exchange("c", 1.0))
    assert set(series.named) == {"a", "b"}
    assert series.requests.values[(OTHER,)] == 1  # c's first request
    feed(table, series, exchange("c", 5.0, status=200))
    assert set(series.named) == {"b", "c"}
    assert series.requests.values == {("b",): 1, ("c",): 1, (OTHER,): 2}  # a's folded in


def test_a_tenant_named_at_its_first_request_is_counted_once_for_both() -> None:
    """Its series are the table's figures, until the table forgets it and they part."""
    table, series = TenantTable(max_tenants=1), TenantSeries(named_max=2)
    feed(table, series, exchange("a"), exchange("a"))
    assert series.by_label.figures["a"] is table.get("a")
    feed(table, series, exchange("b", 1.0), exchange("a"))  # b took a's place in the table
    assert series.requests.values == {("a",): 3, ("b",): 1}
    assert table.get("a") is not None and table.get("a").requests == 1  # type: ignore[union-attr]


def test_equal_tenants_do_not_take_turns_at_a_name() -> None:
    table, series = TenantTable(), TenantSeries(named_max=1)
    for _ in range(20):
        feed(table, series, exchange("a"), exchange("b"))
    assert set(series.named) == {"a"}


def test_a_tenant_called_other_is_counted_as_other() -> None:
    table, series = TenantTable(), TenantSeries(named_max=4)
    feed(table, series, exchange(OTHER), exchange("a"))
    assert set(series.named) == {"a"}
    assert series.requests.values[(OTHER,)] == 1


traffic = st.lists(
    st.tuples(
        st.integers(0, 30),  # tenant
        st.sampled_from([0.5, 2.0, 40.0]),  # infer ms
        st.sampled_from([200, 200, 429, 507]),
    ),
    max_size=300,
)


@given(traffic, st.integers(1, 5))
def test_named_series_stay_capped_and_add_up_to_every_request(
    requests: list[tuple[int, float, int]], named_max: int
) -> None:
    table, series = TenantTable(max_tenants=16), TenantSeries(named_max)
    fed = [exchange(f"t{tenant}", infer_ms, status) for tenant, infer_ms, status in requests]
    for each in fed:
        feed(table, series, each)
        tenants = {labels[0] for labels in series.requests.values} - {OTHER}
        assert tenants == set(series.named) and len(tenants) <= named_max
    assert sum(series.requests.values.values()) == len(fed)
    assert sum(sum(counts) for counts in series.request_seconds.counts.values()) == len(fed)
    worker_s = sum(each.timings_ms.get("infer", 0.0) for each in fed) / 1000
    assert abs(sum(series.worker_seconds.values.values()) - worker_s) < 1e-9
    refused = sum(1 for each in fed if each.status >= 400)
    assert sum(series.rejections.values.values()) == refused


@given(traffic)
def test_no_series_ever_goes_down(requests: list[tuple[int, float, int]]) -> None:
    """A counter that went down would read as a reset: `other` only grows, a name only grows
    while it is named."""
    table, series = TenantTable(), TenantSeries(named_max=3)
    seen: dict[tuple[str, ...], float] = {}
    for tenant, infer_ms, status in requests:
        feed(table, series, exchange(f"t{tenant}", infer_ms, status))
        for labels, value in series.requests.values.items():
            assert value >= seen.get(labels, 0)
        seen = dict(series.requests.values)


def state(table: TenantTable, series: TenantSeries) -> tuple[object, ...]:
    """Everything the table and the series show."""
    tenants = table.page("", MAX_SHOWN)
    return (
        {tenant: table.get(tenant).describe() for tenant in tenants},  # type: ignore[union-attr]
        series.requests.values,
        series.worker_seconds.values,
        series.request_seconds.counts,
        series.rejections.values,
        dict(series.named),
        series._cheapest,
    )


MAX_SHOWN = 100


@given(traffic, st.integers(1, 5), st.integers(1, 40))
def test_a_run_of_exchanges_counts_as_each_one_in_turn(
    requests: list[tuple[int, float, int]], named_max: int, run_max: int
) -> None:
    """The observer counts held exchanges a tenant's run at a time: the table and the series
    end as they would one exchange at a time."""
    one = (TenantTable(max_tenants=8), TenantSeries(named_max))
    runs = (TenantTable(max_tenants=8), TenantSeries(named_max))
    fed = [exchange(f"t{tenant % 12}", infer_ms, status) for tenant, infer_ms, status in requests]
    feed(*one, *fed)
    for start in range(0, len(fed), run_max):
        for tenant, run in itertools.groupby(fed[start : start + run_max], TENANT):
            runs[1].record_run(tenant, list(run), runs[0])
    assert state(*runs) == state(*one)


@given(traffic, st.integers(1, 5))
def test_exchanges_held_together_count_as_one_by_one(
    requests: list[tuple[int, float, int]], named_max: int
) -> None:
    """The observer counts the exchanges it holds a tenant at a time, though tenants take turns
    among them: each tenant's figures and its recency end as one by one, and the series, named
    or other, add up to every request."""
    one = (TenantTable(), TenantSeries(named_max))
    held = (TenantTable(), TenantSeries(named_max))
    fed = [exchange(f"t{tenant}", infer_ms, status) for tenant, infer_ms, status in requests]
    feed(*one, *fed)
    for start in range(0, len(fed), FOLD_AFTER):
        held[1].record_held(fed[start : start + FOLD_AFTER], held[0])
    assert figures_by_recency(held[0]) == figures_by_recency(one[0])
    series = held[1]
    assert sum(series.requests.values.values()) == len(fed)
    assert sum(sum(counts) for counts in series.request_seconds.counts.values()) == len(fed)
    assert sum(series.rejections.values.values()) == sum(1 for each in fed if each.status >= 400)
    assert len(series.named) <= named_max


def figures_by_recency(table: TenantTable) -> list[tuple[str, object]]:
    """Each tenant's figures, the least recently counted first."""
    return [(tenant, figures.describe()) for tenant, figures in table._figures.items()]


def test_a_folded_series_adds_to_the_one_it_joins() -> None:
    counter = CounterTally("c", "c", ["tenant"])
    counter.inc(("a",), 2)
    counter.inc((OTHER,), 1)
    counter.fold(("a",), (OTHER,))
    assert counter.values == {(OTHER,): 3}
    by_label = LabelFigures(lambda: 0.0)
    for label, duration_s in (("a", 0.0005), ("a", 200.0), (OTHER, 0.002)):
        by_label.of(label).add(exchange(label, status=429, duration_s=duration_s))
    by_label.fold("a", OTHER)
    assert list(by_label.figures) == [OTHER]
    histogram = FiguresHistogram("h", "h", by_label)
    assert histogram.counts[(OTHER,)] == [1, 1, *[0] * 14, 1]
    other = by_label.figures[OTHER]
    assert (other.requests, round(other.latency_s, 6)) == (3, 200.0025)
    assert other.rejections == {"QueueFull": 3}


def test_evictions_are_counted_for_the_tenant_evicted_and_the_one_loading() -> None:
    table, series = TenantTable(), TenantSeries(named_max=1)
    feed(table, series, exchange("a", 2.0), exchange("b", 1.0))
    for victim, loader in (("a", "b"), ("b", "a"), ("b", ""), ("c", "c")):
        table.evicted(victim, loader)
        series.evicted(victim, loader)
    described = {name: table.get(name).describe() for name in "abc"}  # type: ignore[union-attr]
    assert {n: d["evictionsSuffered"] for n, d in described.items()} == {"a": 1, "b": 2, "c": 1}
    assert {n: d["evictionsCaused"] for n, d in described.items()} == {"a": 1, "b": 1, "c": 1}
    assert series.evictions_suffered.values == {("a",): 1, (OTHER,): 3}
    assert series.evictions_caused.values == {("a",): 1, (OTHER,): 2}


def test_loads_are_counted_for_the_tenant_whose_model_loaded() -> None:
    table, series = TenantTable(), TenantSeries(named_max=1)
    feed(table, series, exchange("a", 2.0), exchange("b", 1.0))
    for tenant, seconds in (("a", 0.25), ("b", 0.5), ("b", 0.25)):
        table.loaded(tenant, seconds)
        series.loaded(tenant, seconds)
    described = {name: table.get(name).describe() for name in "ab"}  # type: ignore[union-attr]
    assert {n: (d["loads"], d["loadSeconds"]) for n, d in described.items()} == {
        "a": (1, 0.25),
        "b": (2, 0.75),
    }
    assert series.loads.values == {("a",): 1, (OTHER,): 2}
    assert series.load_seconds.values == {("a",): 0.25, (OTHER,): 0.75}


def test_a_tenant_losing_its_name_folds_its_evictions_into_other() -> None:
    table, series = TenantTable(), TenantSeries(named_max=1)
    feed(table, series, exchange("a", 1.0))
    series.evicted("a", "a")
    feed(table, series, exchange("b", 5.0))
    assert set(series.named) == {"b"}
    assert series.evictions_suffered.values == {(OTHER,): 1}
    assert series.evictions_caused.values == {(OTHER,): 1}


def test_bytes_held_by_unnamed_tenants_add_up_in_other() -> None:
    holdings = TenantHoldings({"a": 10, "b": 20, "": 5}, {"b": 7})
    table, series = TenantTable(), TenantSeries(named_max=1, holdings=lambda: holdings)
    feed(table, series, exchange("a", 1.0))
    families = {tally.name: tally.family() for tally in series.tallies}
    memory = {
        s.labels["tenant"]: s.value for s in families["modelhost_tenant_memory_bytes"].samples
    }
    disk = {s.labels["tenant"]: s.value for s in families["modelhost_tenant_disk_bytes"].samples}
    assert memory == {"a": 10, OTHER: 25}
    assert disk == {OTHER: 7}
