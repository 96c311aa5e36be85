"""The tallies expose what prometheus_client's own metrics would for the same updates: the same
sample names, labels and values (bucket bounds included), so a scrape cannot tell them apart."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram

from modelhost.observe.metrics import SECONDS_BUCKETS
from modelhost.observe.tallies import CounterTally, HistogramTally, Tallies

LABELS = st.sampled_from([("GET", "200"), ("POST", "200"), ("POST", "507")])
SECONDS = st.one_of(
    st.sampled_from(SECONDS_BUCKETS),  # on a bound: counted in its bucket (le)
    st.floats(0, 200, allow_nan=False),
)


def samples(registry: CollectorRegistry) -> set[tuple[str, tuple[tuple[str, str], ...], float]]:
    return {
        (s.name, tuple(sorted(s.labels.items())), round(s.value, 9))
        for family in registry.collect()
        for s in family.samples
        if not s.name.endswith("_created")
    }


@given(st.lists(st.tuples(LABELS, SECONDS), max_size=40))
def test_a_histogram_tally_exposes_what_a_prometheus_histogram_does(
    observations: list[tuple[tuple[str, str], float]],
) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    histogram = Histogram(
        "h_seconds", "h", ["method", "status"], registry=theirs, buckets=SECONDS_BUCKETS
    )
    tally = HistogramTally("h_seconds", "h", ["method", "status"], SECONDS_BUCKETS)
    Tallies(ours, [tally])
    for labels, value in observations:
        histogram.labels(*labels).observe(value)
        tally.observe(labels, value)
    assert samples(ours) == samples(theirs)


@given(st.lists(st.tuples(LABELS, st.integers(0, 10**9)), max_size=40))
def test_a_counter_tally_exposes_what_a_prometheus_counter_does(
    increments: list[tuple[tuple[str, str], int]],
) -> None:
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    counter = Counter("c_bytes", "c", ["method", "status"], registry=theirs)
    tally = CounterTally("c_bytes", "c", ["method", "status"])
    Tallies(ours, [tally])
    for labels, amount in increments:
        counter.labels(*labels).inc(amount)
        tally.inc(labels, amount)
    assert samples(ours) == samples(theirs)
