"""The admission filter's memory does not grow with the names it has counted."""

from __future__ import annotations

import tracemalloc

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
