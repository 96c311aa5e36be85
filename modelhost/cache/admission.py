"""The TinyLFU admission filter (Einziger et al. 2017): a load evicts models requested no more
often than the one it brings in before any other, so a burst of one-off requests (a scan) costs
the hot set one slot instead of one model per request.

Frequencies are estimated by a count-min sketch: `depth` rows of `width` small counters, a
model's estimate is the least of its counters. Every `sample_size` recorded requests all counters
are halved, so the estimates follow recent traffic instead of all of history.

What "refused" means in the server: a model server cannot answer without loading the model, and
a cache filter must not turn a servable request into an error, so the newcomer is always loaded.
The filter decides *whom* it evicts: the policy chooses among the candidates whose estimate is at
most the newcomer's (the tier records the pending request before it asks, so a model as rare as
its victim is admitted); only when those cannot free enough does the policy choose among all
idle models, as without the filter. A newcomer let in that way is itself the rarest model in
memory, so the next load evicts it first: a scan churns one slot. (Waiting instead, like a load
behind busy models, kept more hits in `modelhost simulate` but failed 11% of requests with 507 on
a plain Zipf trace; docs/decisions.md has the figures.)
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Sequence
from typing import TypeVar

from modelhost.cache.policy import Sized

COUNTER_MAX = 15  # 4-bit counters, as in TinyLFU: enough to rank, and halving keeps them small
# the hot names' hashes stay cached; a scan of ever new names must not grow the frontend
HASHED_NAMES = 4096

T = TypeVar("T", bound=Sized)


@functools.lru_cache(maxsize=HASHED_NAMES)  # the few hot names are hashed on every request
def _hashes(name: str, depth: int) -> int:
    """`depth` independent 32-bit hashes of a name, packed in one int (one object a cached name);
    stable across processes (unlike `hash`), so simulate repeats itself."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=4 * depth).digest(), "little")


class FrequencySketch:
    """Count-min sketch of request counts per model name, halved every `sample_size` records."""

    def __init__(self, width: int = 1024, depth: int = 4, sample_size: int | None = None) -> None:
        self.width, self.depth = width, depth
        self.sample_size = sample_size or 10 * width  # TinyLFU's W = 10 × counters per row
        self.rows = [[0] * width for _ in range(depth)]
        self.recorded = 0

    def _slots(self, name: str) -> list[int]:
        packed = _hashes(name, self.depth)
        return [(packed >> (32 * i) & 0xFFFFFFFF) % self.width for i in range(self.depth)]

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
