"""The admission filter's memory does not grow with the names it has counted, and a list of
names counts as each in turn."""

from __future__ import annotations

import tracemalloc

from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.cache.admission import HASHED_NAMES, FrequencySketch, _slots_of


def test_sketch_size_is_bounded() -> None:
    """A sketch that counted 100000 names holds a bounded few bytes."""
    _slots_of.cache_clear()
    sketch = FrequencySketch()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100_000):
            sketch.record(f"tenant-{i}/model.tar.gz")
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= HASHED_NAMES * 400
    assert sketch.estimate("tenant-99999/model.tar.gz") >= 1


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=40), max_size=6),
    sample_size=st.integers(1, 30),
)
def test_recording_a_list_counts_as_recording_each_in_turn(
    batches: list[list[str]], sample_size: int
) -> None:
    """Counters past their cap and halvings inside a list included."""
    together, each = (FrequencySketch(width=4, depth=2, sample_size=sample_size) for _ in "ab")
    for names in batches:
        together.record_all(names)
        for name in names:
            each.record(name)
    assert (together.rows, together.recorded) == (each.rows, each.recorded)


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["record", "estimate"]), st.sampled_from("abcdefgh")),
        max_size=300,
    ),
    sample_size=st.integers(1, 80),
)
def test_an_estimate_sees_every_name_recorded_before_it(
    steps: list[tuple[str, str]], sample_size: int
) -> None:
    """Names are held and counted together; an estimate reads what counting each at once, as
    TinyLFU does, gives: capped counters, halved every `sample_size`."""
    sketch = FrequencySketch(width=4, depth=2, sample_size=sample_size)
    rows, recorded = [[0] * 4 for _ in range(2)], 0
    for step, name in steps:
        slots = _slots_of(name, 2, 4)
        if step == "estimate":
            counted = [row[slot] for row, slot in zip(rows, slots, strict=True)]
            assert sketch.estimate(name) == min(counted)
            continue
        sketch.record(name)
        for row, slot in zip(rows, slots, strict=True):
            row[slot] = min(15, row[slot] + 1)
        recorded += 1
        if recorded >= sample_size:
            rows, recorded = [[count // 2 for count in row] for row in rows], recorded // 2
    assert (sketch.rows, sketch.recorded) == (rows, recorded)
