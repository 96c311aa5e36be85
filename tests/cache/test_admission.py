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
