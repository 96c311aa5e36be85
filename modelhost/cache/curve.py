"""The live miss-ratio curve: LRU's hit ratio at every memory size, from the requests served.

SHARDS's hash sample, with the frequent names tracked apart: docs/decisions.md, "The live
miss-ratio curve: SHARDS with its frequent names taken out".
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import heapq
import itertools
import math
from collections.abc import Iterable, Iterator, Sequence

from modelhost.cache.distinct import DistinctBytes
from modelhost.cache.reuse import StackDistances

HASH_SPACE = 1 << 24
BINS_PER_DOUBLING = 8
BINS = 64 * BINS_PER_DOUBLING  # distances up to 2**64 bytes
WINDOWS_S = {"hour": 3600.0, "day": 86400.0}
MAX_NAMES = 10_000
FREQUENT, SAMPLED = 0, 1  # the groups of `StackDistances`
HASHED_NAMES = 4096
RESCALE_AT = 1e200  # new weights grow instead of old ones decaying, until this
GROWTH_STEP_S = 1.0
SAMPLE_ERROR = 0.25  # the largest relative error of the sample's bytes between two uses


@functools.lru_cache(maxsize=HASHED_NAMES)
def name_hash(name: str) -> int:
    """Stable across processes, so a replay samples alike."""
    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=3).digest(), "little")


def bin_of(distance: float) -> int:
    index = int(math.log2(distance) * BINS_PER_DOUBLING) if distance > 1 else 0
    return index if index < BINS else BINS - 1


def upper_edge(index: int) -> float:
    return math.pow(2.0, (index + 1) / BINS_PER_DOUBLING)


EDGES = [upper_edge(i) for i in range(BINS)]


COLD = -1  # first uses, missed at any size


class Windows:
    """Weighted uses by bin, one decaying histogram per window.

    A new use is multiplied by e^(age/tau) rather than every old one divided, so an add is O(1).
    """

    def __init__(self, now: float, windows_s: dict[str, float] = WINDOWS_S, bins: int = BINS):
        self.names, self.taus = tuple(windows_s), tuple(windows_s.values())
        self.histograms = [[0.0] * (bins + 1) for _ in self.taus]
        self.origin = now
        self.growth, self.growth_until = [1.0] * len(self.taus), now + GROWTH_STEP_S
        self._pairs = self._paired()

    def add(self, index: int, weight: float, now: float) -> None:
        if now >= self.growth_until:
            self._grow(now)
        for histogram, growth in self._pairs:  # zipped once a growth step, not per use
            histogram[index] += weight * growth

    def add_times(self, index: int, weight: float, times: int, now: float) -> None:
        """As `times` adds."""
        if now >= self.growth_until:
            self._grow(now)
        for histogram, growth in self._pairs:
            value, step = histogram[index], weight * growth
            for _ in range(times):
                value += step
            histogram[index] = value

    def add_all(self, index: int, weight: float, times: Sequence[float]) -> None:
        """As `add` at each of `times`, in turn (a clock's readings, never decreasing)."""
        start, end = 0, len(times)
        while start < end:
            if times[start] >= self.growth_until:
                self._grow(times[start])
            stop = bisect.bisect_left(times, self.growth_until, start, end)  # same growth
            self.add_times(index, weight, stop - start, times[start])
            start = stop

    def _paired(self) -> list[tuple[list[float], float]]:
        return list(zip(self.histograms, self.growth, strict=True))

    def _grow(self, now: float) -> None:
        self.growth = [math.exp((now - self.origin) / tau) for tau in self.taus]
        self.growth_until = now + GROWTH_STEP_S
        if max(self.growth) > RESCALE_AT:
            for histogram, growth in zip(self.histograms, self.growth, strict=True):
                histogram[:] = [value / growth for value in histogram]
            self.growth, self.origin = [1.0] * len(self.taus), now
        self._pairs = self._paired()

    def curve(self, window: str) -> Curve:
        histogram = self.histograms[self.names.index(window)]
        return Curve(histogram[:COLD], histogram[COLD])


class Curve:
    """One window's histogram, read as LRU's hit ratio by room."""

    def __init__(self, bins: list[float], cold: float) -> None:
        self.bins, self.cold = bins, cold

    @property
    def total(self) -> float:
        return self.cold + math.fsum(self.bins)

    def cumulative(self) -> list[float]:
        total = self.total
        return [value / total if total else 0.0 for value in itertools.accumulate(self.bins)]

    def hit_ratio_at(self, room_bytes: float) -> float:
        """Interpolated inside its bin."""
        if room_bytes < 1 or not self.total:
            return 0.0
        shares = self.cumulative()
        index = bin_of(room_bytes)
        below = shares[index - 1] if index else 0.0
        low = EDGES[index - 1] if index else 1.0
        inside = (room_bytes - low) / (EDGES[index] - low)
        return below + (shares[index] - below) * min(1.0, max(0.0, inside))

    def room_for(self, hit_ratio: float) -> float:
        """The least room reaching `hit_ratio`; infinity when first uses forbid it."""
        shares = self.cumulative()
        index = bisect.bisect_left(shares, hit_ratio)
        if index == BINS or not self.total:
            return math.inf
        below = shares[index - 1] if index else 0.0
        low = EDGES[index - 1] if index else 1.0
        inside = (hit_ratio - below) / (shares[index] - below) if shares[index] > below else 1.0
        return low + (EDGES[index] - low) * inside

    def points(self) -> Iterator[tuple[int, float]]:
        used = [i for i, value in enumerate(self.bins) if value]
        if not used:
            return
        shares = self.cumulative()
        for index in range(used[0], used[-1] + 1):
            yield round(EDGES[index]), round(shares[index], 6)


class Frequent:
    """The heavy hitters among every `stride`-th request, their counts halved each window."""

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
        self.total = 0.0
        self.served: dict[str, int] = {}  # since the name became frequent
        self.seen = 0  # every request, the clock of `joined`
        self.joined: dict[str, int] = {}  # `seen` before the name became frequent
        self._skip, self._counted, self._ends = stride, 0, math.inf

    def saw(self, name: str, now: float) -> list[str]:
        """Count a request; returns the names no longer frequent."""
        self.seen += 1
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
            self.served[name], self.joined[name] = 0, self.seen - 1

    def shares(self) -> dict[str, float]:
        return {name: self.counts.get(name, 0) / self.total for name in self.names}

    def _next_window(self, now: float) -> list[str]:
        self._counted, self._ends, self.total = 0, now + self.half_life_s, self.total / 2
        self.counts = {n: c // 2 for n, c in self.counts.items() if c > 1}
        cooled = [n for n in self.names if self.counts.get(n, 0) < self.min_count // 2]
        self.names.difference_update(cooled)
        for name in cooled:
            del self.served[name], self.joined[name]
        return cooled


class MissRatioCurve:
    """Stack distances of the frequent names and a hash sample of the rest, by window.

    Between two uses of a frequent name the sample holds few of the rest, each standing for
    1/rate names, so there the rest's bytes are those expected from the sample's reuse times.
    """

    def __init__(self, now: float, max_names: int = MAX_NAMES) -> None:
        self.max_names = max_names
        self.threshold = HASH_SPACE
        self.frequent = Frequent()
        self.distances = StackDistances(groups=2)
        self._highest: list[tuple[int, str]] = []  # a max-heap of hashes, the next to drop
        self.windows = Windows(now)
        self.rest = 0  # requests for names not frequent: the clock of reuse times
        self._rest_at: dict[str, int] = {}  # of each tracked name's last use
        self.distinct = DistinctBytes()

    @property
    def rate(self) -> float:
        return self.threshold / HASH_SPACE

    def record(self, name: str, size: int, now: float) -> None:
        self._forget(self.frequent.saw(name, now))
        self._use(name, size, now)

    def record_all(self, uses: Iterable[tuple[str, int, float]]) -> None:
        """As `record` each (name, size, now) in turn."""
        frequent, windows = self.frequent, self.windows
        again, top, top_size, top_at = 0, "", 0, 0.0  # top: a frequent name, just used
        for name, size, now in uses:
            cooled = frequent.saw(name, now)
            if name == top and size == top_size and not cooled and now < windows.growth_until:
                frequent.served[name] += 1  # its own size away, at the same growth: together
                again += 1
                continue
            self._forget(cooled)
            if again:
                windows.add_times(bin_of(top_size), 1.0, again, top_at)
                again = 0
            self._use(name, size, now)
            top, top_size, top_at = (name, size, now) if name in frequent.names else ("", 0, 0.0)
        if again:
            windows.add_times(bin_of(top_size), 1.0, again, top_at)

    def _forget(self, cooled: list[str]) -> None:
        for name in cooled:
            self.distances.forget(name)  # a sampled one comes back in its group
            self._rest_at.pop(name, None)

    def _use(self, name: str, size: int, now: float) -> None:
        if name in self.frequent.names:
            self.frequent.served[name] += 1
            distance = self._frequent_distance(name, size)
            if distance != math.inf:  # it just joined, and was seen before: no first use
                self._add(distance, 1.0, now)
            return
        self.rest += 1
        hashed = name_hash(name)
        if hashed >= self.threshold:
            return
        if name not in self.distances:
            heapq.heappush(self._highest, (-hashed, name))
        last = self._rest_at.get(name)
        self._rest_at[name] = self.rest
        if self.threshold < HASH_SPACE:  # while every name is tracked, distances are exact
            self.distinct.add(size, math.inf if last is None else self.rest - last)
        self._add(self.distances.use(name, size, SAMPLED), 1 / self.rate, now)
        if len(self.distances) > self.max_names + len(self.frequent.names):
            self._lower_threshold()

    def _frequent_distance(self, name: str, size: int) -> float:
        """The frequent names' bytes as tracked; the rest's by the sample if it holds enough."""
        last = self._rest_at.get(name)
        self._rest_at[name] = self.rest
        if last is None or last == self.rest or not self.distinct.uses:  # exact, or no estimate
            return self.distances.use(name, size, FREQUENT)
        between = self.distinct.expected_in(self.rest - last)
        if self._sample_suffices(between):
            return self.distances.use(name, size, FREQUENT)
        weights = self.distances.weights
        weights[SAMPLED], sampled_weight = 0.0, weights[SAMPLED]
        distance = self.distances.use(name, size, FREQUENT)
        weights[SAMPLED] = sampled_weight
        return distance + between

    def _sample_suffices(self, rest_bytes: float) -> bool:
        """Whether the sample's bytes of the rest are likely within `SAMPLE_ERROR` of the truth."""
        # relative variance: (1 - rate) / (rate × the names among the rest's bytes)
        names = rest_bytes / self.distinct.mean_size if self.distinct.mean_size else 0.0
        return 1 - self.rate <= SAMPLE_ERROR**2 * self.rate * names

    def _add(self, distance: float, weight: float, now: float) -> None:
        self.windows.add(COLD if distance == math.inf else bin_of(distance), weight, now)

    def _lower_threshold(self) -> None:
        """Drop the names with the highest hash and sample below it."""
        self.threshold = -self._highest[0][0]
        while self._highest and -self._highest[0][0] >= self.threshold:
            name = heapq.heappop(self._highest)[1]
            if name not in self.frequent.names:
                self.distances.forget(name)
                self._rest_at.pop(name, None)
        self.distances.weights[SAMPLED] = 1 / self.rate
