"""The TinyLFU admission filter (Einziger et al. 2017), as a choice of whom to evict.

A load evicts rarer models first, so a scan churns one slot, and the newcomer is always loaded:
docs/decisions.md, "Admission (TinyLFU) picks whom to evict first and never refuses a request".
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable

from modelhost.cache.policy import Sized

COUNTER_MAX = 15  # 4-bit counters, as in TinyLFU
HASHED_NAMES = 4096  # bounded, so a scan of new names cannot grow the frontend


@functools.lru_cache(maxsize=HASHED_NAMES)  # hot names are hashed on every request
def _hashes(name: str, depth: int) -> int:
    """`depth` 32-bit hashes packed in one int; unlike `hash`, stable so simulate repeats."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4 * depth).digest(), "little")


class FrequencySketch:
    """Count-min sketch of requests per name, halved every `sample_size` to follow recent ones."""

    def __init__(self, width: int = 1024, depth: int = 4, sample_size: int | None = None) -> None:
        self.width, self.depth = width, depth
        self.sample_size = sample_size or 10 * width  # TinyLFU's W
        self.rows = [[0] * width for _ in range(depth)]
        self.recorded = 0

    def _slots(self, name: str) -> list[int]:
        packed, width = _hashes(name, self.depth), self.width
        return [(packed >> shift & 0xFFFFFFFF) % width for shift in range(0, 32 * self.depth, 32)]

    def record(self, name: str) -> None:
        for row, slot in zip(self.rows, self._slots(name), strict=True):
            if row[slot] < COUNTER_MAX:
                row[slot] += 1
        self.recorded += 1
        if self.recorded >= self.sample_size:
            self._halve()

    def _halve(self) -> None:
        self.rows = [[count // 2 for count in row] for row in self.rows]
        self.recorded //= 2

    def estimate(self, name: str) -> int:
        return min(row[slot] for row, slot in zip(self.rows, self._slots(name), strict=True))


def no_more_frequent(sketch: FrequencySketch, newcomer: str) -> Callable[[Sized], bool]:
    """Whether a candidate is no more frequent than `newcomer`, whose pending request is
    counted."""
    newcomer_frequency = sketch.estimate(newcomer)
    return lambda candidate: sketch.estimate(candidate.name) <= newcomer_frequency
