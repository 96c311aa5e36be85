"""The live miss-ratio curve: LRU's hit ratio at every memory size, from the requests served.

Stack distances (`cache/reuse.py`, the code `modelhost simulate` measures with) are taken on a
spatial sample of the names, as SHARDS does (Waldspurger et al., FAST 2015): a name is sampled
when its hash falls under a threshold, so the sample keeps every use of the names it holds and the
distances it measures, scaled by the sampling rate, estimate the whole stream's. Past `max_names`
tracked names the threshold falls to drop the highest hashes, so memory and the work per request
stay bounded at millions of names; a name outside the sample costs one cached hash.

A spatial sample alone is far off on the skewed traffic of a model server: whether the second
hottest of 100,000 names falls in a 1% sample moves the curve by ten points. So the names
frequent in a sample of the requests (`Frequent`) are tracked apart, each one's own use counted
once and its bytes at their size, and the hash sample stands only for the rest: SHARDS with its
heavy hitters taken out (SHARDS_adj's correction of the total, tried too, was worse with them).

Each sampled use adds to histograms of distances in log-spaced byte bins, one per window: its
weight decays with the window's time constant, so the curve follows the traffic of the last hour
(or day) rather than all of history.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import heapq
import itertools
import math
from collections.abc import Iterator

from modelhost.cache.reuse import StackDistances

HASH_SPACE = 1 << 24
BINS_PER_DOUBLING = 8  # a bin's upper edge is 9% above its lower one
BINS = 64 * BINS_PER_DOUBLING  # distances up to 2**64 bytes
WINDOWS_S = {"hour": 3600.0, "day": 86400.0}
MAX_NAMES = 10_000
FREQUENT, SAMPLED = 0, 1  # the groups of `StackDistances`
HASHED_NAMES = 4096  # the hot names' hashes stay cached, as the admission filter's do
RESCALE_AT = 1e200  # decay is applied by growing new weights; past this, shrink the histogram
GROWTH_STEP_S = 1.0  # how often the growth of new weights is brought up to date


@functools.lru_cache(maxsize=HASHED_NAMES)
def name_hash(name: str) -> int:
    """A name's place in the hash space; stable across processes, so a replay samples alike."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=3).digest(), "little")


def bin_of(distance: float) -> int:
    index = int(math.log2(distance) * BINS_PER_DOUBLING) if distance > 1 else 0
    return index if index < BINS else BINS - 1


def upper_edge(index: int) -> float:
    return math.pow(2.0, (index + 1) / BINS_PER_DOUBLING)


EDGES = [upper_edge(i) for i in range(BINS)]


COLD = -1  # the slot of first uses, after the bins: missed at any size


class Windows:
    """Weighted uses by bin (of stack distance, or any other), one histogram per window, all
    added to at once. Each decays with its window's time constant: a use's weight is multiplied
    by e^(age/tau) when added rather than every other's divided, so an add is O(1)."""

    def __init__(self, now: float, windows_s: dict[str, float] = WINDOWS_S, bins: int = BINS):
        self.names, self.taus = tuple(windows_s), tuple(windows_s.values())
        self.histograms = [[0.0] * (bins + 1) for _ in self.taus]  # [-1]: first uses
        self.origin = now
        self.growth, self.growth_until = [1.0] * len(self.taus), now + GROWTH_STEP_S

    def add(self, index: int, weight: float, now: float) -> None:
        """`weight` uses in bin `index` (`COLD`: first uses)."""
        if now >= self.growth_until:
            self._grow(now)
        for histogram, growth in zip(self.histograms, self.growth, strict=True):
            histogram[index] += weight * growth

    def _grow(self, now: float) -> None:
        """The factors new weights take from now, for the next step; past `RESCALE_AT`, what is
        held shrinks instead."""
        self.growth = [math.exp((now - self.origin) / tau) for tau in self.taus]
        self.growth_until = now + GROWTH_STEP_S
        if max(self.growth) > RESCALE_AT:
            for histogram, growth in zip(self.histograms, self.growth, strict=True):
                histogram[:] = [value / growth for value in histogram]
            self.growth, self.origin = [1.0] * len(self.taus), now

    def curve(self, window: str) -> Curve:
        histogram = self.histograms[self.names.index(window)]
        return Curve(histogram[:COLD], histogram[COLD])


class Curve:
    """One window's histogram, read as LRU's hit ratio at each room for models."""

    def __init__(self, bins: list[float], cold: float) -> None:
        self.bins, self.cold = bins, cold

    @property
    def total(self) -> float:
        return self.cold + math.fsum(self.bins)

    def cumulative(self) -> list[float]:
        """The share of uses at each bin's upper edge or under."""
        total = self.total
        return [value / total if total else 0.0 for value in itertools.accumulate(self.bins)]

    def hit_ratio_at(self, room_bytes: float) -> float:
        """LRU's hit ratio with `room_bytes` for models, interpolated inside its bin."""
        if room_bytes < 1 or not self.total:
            return 0.0
        shares = self.cumulative()
        index = bin_of(room_bytes)
        below = shares[index - 1] if index else 0.0
        low = EDGES[index - 1] if index else 1.0
        inside = (room_bytes - low) / (EDGES[index] - low)
        return below + (shares[index] - below) * min(1.0, max(0.0, inside))

    def room_for(self, hit_ratio: float) -> float:
        """The least room at which LRU reaches `hit_ratio`; infinity when none does (too many
        first uses)."""
        shares = self.cumulative()
        index = bisect.bisect_left(shares, hit_ratio)
        if index == BINS or not self.total:
            return math.inf
        below = shares[index - 1] if index else 0.0
        low = EDGES[index - 1] if index else 1.0
        inside = (hit_ratio - below) / (shares[index] - below) if shares[index] > below else 1.0
        return low + (EDGES[index] - low) * inside

    def points(self) -> Iterator[tuple[int, float]]:
        """The curve at each bin edge between the first and last bins used."""
        used = [i for i, value in enumerate(self.bins) if value]
        if not used:
            return
        shares = self.cumulative()
        for index in range(used[0], used[-1] + 1):
            yield round(EDGES[index]), round(shares[index], 6)


class Frequent:
    """The names with at least `min_count` of every `stride`-th request in a window: the
    requests' heavy hitters, at most `max_names` of them, and each one's share of the requests.
    A window ends after `window` counted requests or `half_life_s`, whichever comes first, and
    halves the counts, so they follow the traffic."""

    def __init__(
        self,
        stride: int = 4,
        window: int = 8192,
        min_count: int = 4,
        max_names: int = 4096,
        half_life_s: float = 30.0,
    ) -> None:
        self.stride, self.window, self.min_count = stride, window, min_count
        self.max_names, self.half_life_s = max_names, half_life_s
        self.names: set[str] = set()
        self.counts: dict[str, int] = {}
        self.total = 0.0  # the counted requests, halved with the counts
        self.served: dict[str, int] = {}  # each frequent name's requests since it became one
        self._skip, self._counted, self._ends = stride, 0, math.inf

    def saw(self, name: str, now: float) -> list[str]:
        """Count a request; the names no longer frequent, when a window ends."""
        self._skip -= 1
        if self._skip:
            return []
        self._skip = self.stride
        count = self.counts[name] = self.counts.get(name, 0) + 1
        if count >= self.min_count and name not in self.names:
            self._add(name)
        self._counted += 1
        self.total += 1
        self._ends = min(self._ends, now + self.half_life_s)
        if self._counted < self.window and len(self.counts) < 4 * self.max_names:
            return [] if now < self._ends else self._next_window(now)
        return self._next_window(now)

    def _add(self, name: str) -> None:
        if len(self.names) < self.max_names:
            self.names.add(name)
            self.served[name] = 0

    def shares(self) -> dict[str, float]:
        """Each frequent name's share of the requests."""
        return {name: self.counts.get(name, 0) / self.total for name in self.names}

    def _next_window(self, now: float) -> list[str]:
        self._counted, self._ends, self.total = 0, now + self.half_life_s, self.total / 2
        self.counts = {n: c // 2 for n, c in self.counts.items() if c > 1}
        cooled = [n for n in self.names if self.counts.get(n, 0) < self.min_count // 2]
        self.names.difference_update(cooled)
        for name in cooled:
            del self.served[name]
        return cooled


class MissRatioCurve:
    """Stack distances of the frequent names and a spatial sample of the others; each window's
    histogram of them."""

    def __init__(self, now: float, max_names: int = MAX_NAMES) -> None:
        self.max_names = max_names
        self.threshold = HASH_SPACE  # a name is sampled when its hash is under this
        self.frequent = Frequent()
        self.distances = StackDistances(groups=2)
        self._highest: list[tuple[int, str]] = []  # (-hash, name): the next to drop on top
        self.windows = Windows(now)

    @property
    def rate(self) -> float:
        return self.threshold / HASH_SPACE

    def record(self, name: str, size: int, now: float) -> None:
        """A request for `name`, which takes `size` bytes in memory."""
        for cooled in self.frequent.saw(name, now):
            self.distances.forget(cooled)  # a sampled one comes back in its group
        if name in self.frequent.names:
            self.frequent.served[name] += 1
            distance = self.distances.use(name, size, FREQUENT)
            if distance != math.inf:  # else it just joined: seen before, it is no first use
                self._add(distance, 1.0, now)
            return
        hashed = name_hash(name)
        if hashed >= self.threshold:
            return
        if name not in self.distances:
            heapq.heappush(self._highest, (-hashed, name))
        self._add(self.distances.use(name, size, SAMPLED), 1 / self.rate, now)
        if len(self.distances) > self.max_names + len(self.frequent.names):
            self._lower_threshold()

    def _add(self, distance: float, weight: float, now: float) -> None:
        self.windows.add(COLD if distance == math.inf else bin_of(distance), weight, now)

    def _lower_threshold(self) -> None:
        """Drop the sampled names with the highest hash, and sample below it from now on."""
        self.threshold = -self._highest[0][0]
        while self._highest and -self._highest[0][0] >= self.threshold:
            name = heapq.heappop(self._highest)[1]
            if name not in self.frequent.names:
                self.distances.forget(name)
        self.distances.weights[SAMPLED] = 1 / self.rate
