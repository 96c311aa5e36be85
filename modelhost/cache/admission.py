"""The TinyLFU admission filter (Einziger et al. 2017): a load may evict only models requested
no more often than the one it brings in, so a burst of one-off requests (a scan) cannot push the
hot set out of memory.

Frequencies are estimated by a count-min sketch: `depth` rows of `width` small counters, a
model's estimate is the least of its counters. Every `sample_size` recorded requests all counters
are halved, so the estimates follow recent traffic instead of all of history.

What "refused" means in the server: a model server cannot answer without loading the model, so
refusal never means "serve without caching". The newcomer is loaded into free room, or by
evicting only candidates whose estimate is at most the newcomer's (the tier records the pending
request before it asks, so a model as rare as its victim is admitted). When those cannot free
enough, the tier's `reserve` returns None and the load takes the path of "every model busy": it
waits for a change until its deadline, then fails with 507. Each retry and each new request
raises the newcomer's estimate, so a model in real demand gets in. `modelhost simulate` counts a
refused request as a miss that leaves the cache unchanged.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import TypeVar

from modelhost.cache.policy import Sized

COUNTER_MAX = 15  # 4-bit counters, as in TinyLFU: enough to rank, and halving keeps them small

T = TypeVar("T", bound=Sized)


@functools.lru_cache(maxsize=65536)  # the same few model names are hashed on every request
def _hashes(name: str, depth: int) -> tuple[int, ...]:
    """`depth` independent 32-bit hashes of a name; stable across processes (unlike `hash`), so
    simulate repeats itself."""
    digest = hashlib.blake2b(name.encode(), digest_size=4 * depth).digest()
    return tuple(int.from_bytes(digest[4 * i : 4 * i + 4], "little") for i in range(depth))


class FrequencySketch:
    """Count-min sketch of request counts per model name, halved every `sample_size` records."""

    def __init__(self, width: int = 1024, depth: int = 4, sample_size: int | None = None) -> None:
        self.width, self.depth = width, depth
        self.sample_size = sample_size or 10 * width  # TinyLFU's W = 10 × counters per row
        self.rows = [[0] * width for _ in range(depth)]
        self.recorded = 0

    def _slots(self, name: str) -> list[int]:
        return [h % self.width for h in _hashes(name, self.depth)]

    def record(self, name: str) -> None:
        for row, slot in zip(self.rows, self._slots(name), strict=True):
            row[slot] = min(COUNTER_MAX, row[slot] + 1)
        self.recorded += 1
        if self.recorded >= self.sample_size:
            self._halve()

    def _halve(self) -> None:
        """Age every count, so a model hot long ago does not outrank one hot now."""
        self.rows = [[count // 2 for count in row] for row in self.rows]
        self.recorded //= 2

    def estimate(self, name: str) -> int:
        return min(row[slot] for row, slot in zip(self.rows, self._slots(name), strict=True))


def admissible(sketch: FrequencySketch, newcomer: str, candidates: Sequence[T]) -> list[T]:
    """The candidates a load of `newcomer` may evict: those no more frequent than the newcomer
    (whose pending request the sketch has already counted)."""
    newcomer_frequency = sketch.estimate(newcomer)
    return [c for c in candidates if sketch.estimate(c.name) <= newcomer_frequency]
