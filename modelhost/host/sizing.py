"""What the live traffic says about the memory budget: hit ratios, budgets and instances needed.

The curve is LRU's, so for other policies it is an estimate. "Room" is the budget less the
idle server and its headroom floor.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from modelhost.cache.curve import COLD, MAX_NAMES, WINDOWS_S, MissRatioCurve, Windows
from modelhost.cache.memory import MemoryTier
from modelhost.host.thrash import WINDOW_S, ThrashWatch
from modelhost.records.events import EventLog
from modelhost.records.held import Held
from modelhost.records.statistics import CurvePoint, HotModel, SizingStatistics

HOT_MODELS = 32  # for a router to spread
TARGETS = (0.9, 0.95, 0.99)  # hit ratios
FACTORS = (0.5, 2.0, 4.0)  # multiples of today's room
DEFAULT_WINDOW = "hour"
_time = operator.itemgetter(2)  # of a held hit, read in C


class Sizing:
    """Fed every request that reached a model; read by `/sizing`, `/stats` and `/metrics`."""

    def __init__(
        self,
        memory: MemoryTier,
        events: EventLog,
        clock: Callable[[], float],
        max_names: int = MAX_NAMES,
        thrash_window_s: float = WINDOW_S,
    ) -> None:
        now = clock()
        self.memory, self.clock = memory, clock
        self.curve = MissRatioCurve(now, max_names) if max_names else None
        self.observed = Windows(now, WINDOWS_S, bins=1)  # [hits, misses]
        self.thrash = ThrashWatch(events, clock, self.advice, thrash_window_s)
        self.requests = 0
        # hits held, then counted together (docs/decisions.md)
        self._held: Held[tuple[str, int, float]] = Held(self._count)
        events.subscribe(self.thrash.on_event)

    def used(self, name: str, size: int, hit: bool) -> None:
        now = self.clock()
        self.requests += 1
        self.thrash.used(name, hit, now)  # its alarm follows each request
        if hit:
            self._held.add((name, size, now))
            return
        self.fold()  # the hits before it first
        self.observed.add(COLD, 1.0, now)
        if self.curve is not None:
            self.curve.record(name, size, now)

    def hits(self, uses: list[tuple[str, int]]) -> None:
        """As `used` each hit of (name, size), at one reading of the clock."""
        now = self.clock()
        self.requests += len(uses)
        self.thrash.hits(len(uses), now)
        self.fold()
        self._count([(name, size, now) for name, size in uses])

    def fold(self) -> None:
        """Count the uses held into the observed ratio and the curve; every read folds first."""
        self._held.fold()

    def _count(self, hits: list[tuple[str, int, float]]) -> None:
        self.observed.add_all(0, 1.0, list(map(_time, hits)))
        if self.curve is not None:
            self.curve.record_all(hits)

    @property
    def fixed_bytes(self) -> int:
        return self.memory.budget.budget_bytes - self.memory.budget.capacity_bytes

    def budget_for(self, hit_ratio: float, window: str = DEFAULT_WINDOW) -> float:
        """The budget at which LRU reaches `hit_ratio` (infinity where none does)."""
        self.fold()
        if self.curve is None:
            return math.inf
        return self.fixed_bytes + self.curve.windows.curve(window).room_for(hit_ratio)

    def advice(self) -> dict[str, Any]:
        needed = self.budget_for(0.95)
        return {
            "budget_bytes": self.memory.budget.budget_bytes,
            "memory_needed_bytes_for_0.95": None if math.isinf(needed) else round(needed),
        }

    def statistics(self, window: str = DEFAULT_WINDOW) -> SizingStatistics:
        self.roll()
        self.fold()
        room = self.memory.budget.capacity_bytes
        histogram = self.curve.windows.curve(window) if self.curve else None
        observed = self.observed.curve(window)
        curve = self.curve
        return SizingStatistics(
            window=window,
            policy=self.memory.victims.policy.name,
            budget_bytes=self.memory.budget.budget_bytes,
            room_bytes=room,
            observed_hit_ratio=_share(observed.bins[0], observed.total),
            predicted_hit_ratio=histogram.hit_ratio_at(room) if histogram else None,
            budget_needed={t: self.budget_for(t, window) for t in TARGETS},
            hit_ratio_at_factor={f: histogram.hit_ratio_at(f * room) for f in FACTORS if histogram},
            instances_needed={
                t: histogram.room_for(t) / room for t in TARGETS if histogram and room > 0
            },
            curve=tuple(CurvePoint(*p) for p in histogram.points()) if histogram else (),
            sampled_names=len(curve.distances) if curve else 0,
            sample_rate=curve.rate if curve else 0.0,
            thrashing=self.thrash.thrashing,
            early_returns=self.thrash.early_returns,
            cache_age_s=self.thrash.cache_age_s,
            requests=self.requests,
            hot_models=self.hot_models(),
        )

    def hot_models(self) -> tuple[HotModel, ...]:
        """The frequent names, by their share of the requests."""
        self.fold()
        if self.curve is None:
            return ()
        frequent = self.curve.frequent
        ranked = sorted(frequent.shares().items(), key=lambda item: -item[1])[:HOT_MODELS]
        return tuple(
            HotModel(n, round(s, 4), frequent.served[n], frequent.seen - frequent.joined[n])
            for n, s in ranked
        )

    def roll(self) -> None:
        """Close the thrash alarm's window if it is due."""
        now = self.clock()
        if now >= self.thrash.window_ends:
            self.thrash.roll(now)


def _share(part: float, total: float) -> float | None:
    return part / total if total else None
