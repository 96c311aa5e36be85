"""The thrash alarm: evicted models come back sooner than the cache's own age.

The cache's age is the median, over recent evictions, of the longest idle time among the loaded
models (a frequency policy often evicts a newcomer, whose own idle time would understate it).
A model back within that age would have stayed in a cache about twice as large, so many early
returns mean the working set has outgrown the budget.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

from modelhost.records.events import Event, EventLog

WINDOW_S = 60.0
STARTS_AT = 0.10  # early returns per request over a window
ENDS_UNDER = 0.05
MIN_EARLY_RETURNS = 10  # a few loads of an idle server are no alarm
RECENT_VICTIMS = 64
REMEMBERED_EVICTIONS = 10_000  # bounded, whatever the names seen


class Window:
    def __init__(self) -> None:
        self.requests = self.misses = self.early = 0

    @property
    def early_share(self) -> float:
        return self.early / self.requests if self.requests else 0.0


class ThrashWatch:
    """Fed each request and eviction; `thrashing` reflects the last full window."""

    def __init__(
        self,
        events: EventLog,
        clock: Callable[[], float],
        advice: Callable[[], dict[str, Any]],
        window_s: float = WINDOW_S,
    ) -> None:
        self.events, self.clock, self.advice = events, clock, advice
        self.window_s = window_s
        self.evicted: OrderedDict[str, float] = OrderedDict()  # name: evicted at
        self.ages_s: deque[float] = deque(maxlen=RECENT_VICTIMS)
        self.window, self.last = Window(), Window()
        self.window_ends = clock() + window_s
        self.thrashing = False
        self.early_returns = 0  # since start

    @property
    def cache_age_s(self) -> float | None:
        return statistics.median(self.ages_s) if self.ages_s else None

    def on_event(self, event: Event) -> None:
        if event.kind != "evict" or event.model is None or "longest_idle_s" not in event.detail:
            return
        self.evicted[event.model] = self.clock()
        self.evicted.move_to_end(event.model)
        while len(self.evicted) > REMEMBERED_EVICTIONS:
            self.evicted.popitem(last=False)
        self.ages_s.append(float(event.detail["longest_idle_s"]))

    def used(self, name: str, hit: bool, now: float) -> None:
        if now >= self.window_ends:
            self.roll(now)
        self.window.requests += 1
        if hit:
            return
        self.window.misses += 1
        evicted_at = self.evicted.pop(name, None)
        age = self.cache_age_s
        if evicted_at is not None and age is not None and now - evicted_at < age:
            self.window.early += 1
            self.early_returns += 1

    def hits(self, count: int, now: float) -> None:
        if now >= self.window_ends:
            self.roll(now)
        self.window.requests += count

    def roll(self, now: float) -> None:
        """End the window (empty if a whole window passed without requests)."""
        self.last = self.window if now < self.window_ends + self.window_s else Window()
        self.window, self.window_ends = Window(), now + self.window_s
        share = self.last.early_share
        if not self.thrashing and share >= STARTS_AT and self.last.early >= MIN_EARLY_RETURNS:
            self._alarm("started")
        elif self.thrashing and share < ENDS_UNDER:
            self._alarm("ended")

    def _alarm(self, reason: str) -> None:
        self.thrashing = reason == "started"
        last = self.last
        self.events.emit(
            "thrash",
            reason=reason,
            detail={
                "window_s": self.window_s,
                "requests": last.requests,
                "misses": last.misses,
                "early_returns": last.early,
                "cache_age_s": round(self.cache_age_s or 0.0, 3),
                **self.advice(),
            },
        )
