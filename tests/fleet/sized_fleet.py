"""A fleet without sockets: one real `Sizing` an instance, fed as the host feeds it, routed by model
as nginx routes, and polled as `modelhost fleet hot-models` polls `GET /sizing`."""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping, Sequence
from itertools import accumulate

from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import LRUPolicy
from modelhost.host.sizing import Sizing
from modelhost.integrations.spread import Poll, rates, spread
from modelhost.observe.describe import describe_sizing
from modelhost.records.events import EventLog

MiB = 2**20


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def zipf(models: int, exponent: float) -> dict[str, float]:
    """Each model's share of the requests, the most popular first."""
    weights = [1 / rank**exponent for rank in range(1, models + 1)]
    return {f"m{i:03d}": weight / sum(weights) for i, weight in enumerate(weights)}


class SizedFleet:
    """`instances` instances behind a router that spreads the models the map names."""

    def __init__(self, instances: int, seed: int = 0) -> None:
        self.clock = Clock()
        self.sizings = [self._sizing() for _ in range(instances)]
        self.copies: dict[str, int] = {}  # the hot-model map
        self.changes = 0  # rewrites of the map, each a reload
        self.random = random.Random(seed)

    def _sizing(self) -> Sizing:
        memory = MemoryTier(MemoryBudget(200 * MiB, 100 * MiB), LRUPolicy(), clock=self.clock)
        return Sizing(memory, EventLog(), self.clock)

    def serve(self, shares: Mapping[str, float], rate_rps: float, seconds: float) -> None:
        """Requests `1 / rate_rps` apart, each for a model drawn by its share."""
        names, cumulative = list(shares), list(accumulate(shares.values()))
        ends = self.clock.now + seconds
        while self.clock.now < ends:
            model = self.random.choices(names, cum_weights=cumulative)[0]
            self.sizings[self.route(model)].used(model, MiB, True)
            self.clock.now += 1 / rate_rps

    def send(self, models: Sequence[str], rate_rps: float) -> None:
        """These requests, in this order, `1 / rate_rps` apart."""
        for model in models:
            self.sizings[self.route(model)].used(model, MiB, True)
            self.clock.now += 1 / rate_rps

    def route(self, model: str) -> int:
        """nginx's rule: a spread model's requests take one of its k keys at random."""
        copies = self.copies.get(model, 1)
        key = model if copies == 1 else f"{model}#{self.random.randrange(copies)}"
        return zlib.crc32(key.encode()) % len(self.sizings)

    def poll(self) -> list[Poll]:
        return [
            Poll.from_sizing(self.clock.now, describe_sizing(sizing.statistics()))
            for sizing in self.sizings
        ]

    def spread_rounds(
        self, shares: Mapping[str, float], rate_rps: float, interval_s: float, rounds: int
    ) -> set[str]:
        """Serve and respread `rounds` times; every model the map named on the way."""
        named: set[str] = set()
        before = self.poll()
        for _ in range(rounds):
            self.serve(shares, rate_rps, interval_s)
            after = self.poll()
            wanted = spread(rates(before, after), len(self.sizings), self.copies)
            self.changes += wanted != self.copies
            self.copies, before = wanted, after
            named |= set(wanted)
        return named
