"""The TinyLFU admission filter (Einziger et al. 2017), as a choice of whom to evict.

A load evicts rarer models first, so a scan churns one slot, and the newcomer is always loaded:
docs/decisions.md, "Admission (TinyLFU) picks whom to evict first and never refuses a request".
"""

from __future__ import annotations

import functools
import hashlib
from array import array
from collections import Counter
from collections.abc import Callable

from modelhost.cache.policy import Sized
from modelhost.records.held import Held

COUNTER_MAX = 15  # 4-bit counters, as in TinyLFU
HASHED_NAMES = 4096  # bounded, so a scan of new names cannot grow the frontend


@functools.lru_cache(maxsize=HASHED_NAMES)  # hot names are hashed on every request
def _slots_of(name: str, depth: int, width: int) -> array[int]:
    """The name's counter in each of `depth` rows; unlike `hash`, stable so simulate repeats.

    An array, not a tuple: a tuple's ints are objects of their own (tests/cache/test_admission).
    """
    digest = hashlib.blake2b(name.encode(), digest_size=4 * depth).digest()
    packed = int.from_bytes(digest, "little")
    return array("L", [(packed >> bit & 0xFFFFFFFF) % width for bit in range(0, 32 * depth, 32)])


class FrequencySketch:
    """Count-min sketch of requests per name, halved every `sample_size` to follow recent ones."""

    def __init__(self, width: int = 1024, depth: int = 4, sample_size: int | None = None) -> None:
        self.width, self.depth = width, depth
        self.sample_size = sample_size or 10 * width  # TinyLFU's W
        self._rows = [[0] * width for _ in range(depth)]
        self._recorded = 0
        # held, then counted together (docs/decisions.md); every read folds first
        self._held: Held[str] = Held(self._count_all)

    @property
    def rows(self) -> list[list[int]]:
        self._held.fold()
        return self._rows

    @property
    def recorded(self) -> int:
        self._held.fold()
        return self._recorded

    def _slots(self, name: str) -> array[int]:
        return _slots_of(name, self.depth, self.width)

    def record(self, name: str) -> None:
        self._held.add(name)

    def record_all(self, names: list[str]) -> None:
        """As `record` each in turn."""
        self._held.fold()
        self._count_all(names)

    def _count_all(self, names: list[str]) -> None:
        """A name's at once where no halving falls among them, else each in turn."""
        if self._recorded + len(names) >= self.sample_size:
            for name in names:
                self._count(name)
            return
        rows = self._rows
        for name, times in Counter(names).items():
            for depth, slot in enumerate(self._slots(name)):
                rows[depth][slot] = min(COUNTER_MAX, rows[depth][slot] + times)
        self._recorded += len(names)

    def _count(self, name: str) -> None:
        rows = self._rows  # indexed, not zipped: zip's strict keyword costs more than the loop
        for depth, slot in enumerate(self._slots(name)):
            if rows[depth][slot] < COUNTER_MAX:
                rows[depth][slot] += 1
        self._recorded += 1
        if self._recorded >= self.sample_size:
            self._halve()

    def _halve(self) -> None:
        self._rows = [[count // 2 for count in row] for row in self._rows]
        self._recorded //= 2

    def estimate(self, name: str) -> int:
        return min(row[slot] for row, slot in zip(self.rows, self._slots(name), strict=True))


def no_more_frequent(sketch: FrequencySketch, newcomer: str) -> Callable[[Sized], bool]:
    """Whether a candidate is no more frequent than `newcomer`, whose pending request is
    counted."""
    newcomer_frequency = sketch.estimate(newcomer)
    return lambda candidate: sketch.estimate(candidate.name) <= newcomer_frequency
