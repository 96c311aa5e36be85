"""A replay in which loads take time on each worker's one loader, as they do in the server.

Room is reserved when a loader takes a load, and a request for a model loading or in line joins
that load: the server counts it a miss, `replay` a hit, and this replay counts both. Load times
and room come from the server's load events where it has them.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryTier, State
from modelhost.cache.policy import EvictionPolicy
from modelhost.records.events import events_in
from modelhost.toolkit.simulate.replay import replay_tier
from modelhost.toolkit.simulate.trace import Trace, log_lines


@dataclass
class Outcomes:
    """How the trace's requests were served."""

    hits: int = 0
    joined: int = 0  # found it loading or in line
    loads: int = 0
    refused: int = 0  # larger than the budget: 507

    @property
    def requests(self) -> int:
        return self.hits + self.joined + self.loads + self.refused

    @property
    def hit_ratio(self) -> float:
        """As the server's header counts them."""
        return self.hits / max(1, self.requests)

    @property
    def no_load_ratio(self) -> float:
        """The requests that started no load, which `replay` calls hits."""
        return (self.hits + self.joined) / max(1, self.requests)


@dataclass(frozen=True)
class LoadSample:
    """One load as the server ran it: its time on the loader and the room it held."""

    held_ms: float
    reserved_bytes: int


def read_load_events(path: Path) -> dict[str, list[LoadSample]]:
    """Each model's loads in a server's log or a saved `/events` stream, in order."""
    return load_samples(events_in(log_lines(path)))


def load_samples(events: Iterable[dict[str, Any]]) -> dict[str, list[LoadSample]]:
    """Each model's loads for requests, not scale-out copies, in order."""
    samples: dict[str, list[LoadSample]] = {}
    for event in events:
        detail = event.get("detail") or {}
        if event.get("kind") != "load" or event.get("reason") != "invoked":
            continue
        if "loader_ms" in detail and "reserved_bytes" in detail:
            sample = LoadSample(float(detail["loader_ms"]), int(detail["reserved_bytes"]))
            samples.setdefault(str(event["model"]), []).append(sample)
    return samples


class Samples:
    """The next load of each model: its recorded loads in turn, else the trace's figures."""

    def __init__(self, trace: Trace, recorded: dict[str, list[LoadSample]] | None) -> None:
        self.trace = trace
        self._turns = {model: itertools.cycle(loads) for model, loads in (recorded or {}).items()}

    def next(self, model: str) -> LoadSample:
        turns = self._turns.get(model)
        if turns is not None:
            return next(turns)
        return LoadSample(self.trace.reload_ms[model], self.trace.sizes[model])


@dataclass
class Loaders:
    """The loads under way, soonest end first, and those waiting for a loader."""

    tier: MemoryTier
    trace: Trace
    samples: Samples
    count: int
    ends: list[tuple[float, str]] = field(default_factory=list)
    waiting: deque[str] = field(default_factory=deque)

    def pending(self, model: str) -> bool:
        return model in self.waiting or self.tier.get(model) is not None

    def ask(self, model: str, now: float) -> None:
        self.waiting.append(model)
        self.start(now)

    def start(self, now: float) -> None:
        """Hand waiting loads to free loaders, in order, while room can be made.

        A load nothing under way can make room for is dropped: the server would answer 507."""
        while self.waiting and len(self.ends) < self.count:
            model = self.waiting.popleft()
            load = self.samples.next(model)
            reserved = max(load.reserved_bytes, self.trace.sizes[model])
            victims = self.tier.reserve(model, reserved)
            if victims is None:
                if self.ends:
                    self.waiting.appendleft(model)  # a load's end may make room
                    return
                continue
            for victim in victims:
                self.tier.remove(victim.name)
            self.tier.victims_gone(self.tier.residents[model], reserved)
            heapq.heappush(self.ends, (now + load.held_ms / 1000, model))

    def finish_until(self, now: float, clock: list[float]) -> None:
        """End the loads due by `now`, each starting the next in line."""
        while self.ends and self.ends[0][0] <= now:
            end, model = heapq.heappop(self.ends)
            clock[0] = end
            self.tier.mark_loaded(model, 0, self.trace.sizes[model], self.trace.reload_ms[model])
            self.start(end)


def replay_loading(
    trace: Trace,
    budget_bytes: int,
    policy: EvictionPolicy,
    loaders: int,
    *,
    admission: FrequencySketch | None = None,
    min_residency_s: float = 0.0,
    recorded: dict[str, list[LoadSample]] | None = None,
) -> Outcomes:
    """The timed trace through the server's own `MemoryTier` with `loaders` loaders."""
    if not trace.times:
        raise ValueError("a replay with load times needs the time of each request")
    clock = [0.0]
    tier = replay_tier(budget_bytes, policy, lambda: clock[0], admission, min_residency_s)
    line = Loaders(tier, trace, Samples(trace, recorded), loaders)
    outcomes = Outcomes()
    for model, now in zip(trace.models, trace.times, strict=True):
        line.finish_until(now, clock)
        clock[0] = now
        resident = tier.get(model)
        if resident is not None and resident.state is State.LOADED:
            outcomes.hits += 1
            tier.begin_request(resident)
            tier.end_request(resident)
        elif line.pending(model):
            outcomes.joined += 1
        elif tier.fits_ever(trace.sizes[model]):
            outcomes.loads += 1
            line.ask(model, now)
        else:
            outcomes.refused += 1
    return outcomes
