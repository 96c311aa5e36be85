"""Sizing on a memory tier of its own: the thrash alarm fires when the working set is twice the
room and stays silent when it fits; the curve's readings say what a budget needs."""

from __future__ import annotations

import random
from collections import OrderedDict

import pytest

from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import LRUPolicy
from modelhost.host.sizing import Sizing
from modelhost.host.thrash import WINDOW_S
from modelhost.records.events import EventLog

MiB = 2**20
MODEL = 10 * MiB
ROOM = 10  # models
BASELINE = 100 * MiB


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class LruServer:
    """What the host tells sizing as it serves: each request's model and whether it was loaded,
    and an `evict` event (with the victim's and the longest idle time) for each model that made
    room. `newcomers_go`: the model loaded last goes first, as frequency policies let a newcomer
    go before the models with many hits."""

    def __init__(
        self, sizing: Sizing, events: EventLog, clock: Clock, newcomers_go: bool = False
    ) -> None:
        self.sizing, self.events, self.clock = sizing, events, clock
        self.newcomers_go = newcomers_go
        self.loaded: OrderedDict[str, float] = OrderedDict()  # name: last used
        self.newest = ""

    def request(self, name: str) -> None:
        hit = name in self.loaded
        if not hit and len(self.loaded) == ROOM:
            longest_s = self.clock.now - min(self.loaded.values())
            victim = self.newest if self.newcomers_go else next(iter(self.loaded))
            idle_s = self.clock.now - self.loaded.pop(victim)
            detail = {"idle_s": round(idle_s, 3), "longest_idle_s": round(longest_s, 3)}
            self.events.emit("evict", victim, reason="policy", detail=detail)
        if not hit:
            self.newest = name
        self.loaded[name] = self.clock.now
        self.loaded.move_to_end(name)
        self.sizing.used(name, MODEL, hit)


class Alarms(list[tuple[str, dict[str, object]]]):
    """The thrash events of a log, as they are emitted (its ring of recent events forgets)."""

    def __init__(self, events: EventLog) -> None:
        super().__init__()
        events.subscribe(
            lambda e: self.append((e.reason, e.detail)) if e.kind == "thrash" else None
        )


def serve(
    models: int, seconds: float, rate: float = 50.0, seed: int = 0, newcomers_go: bool = False
) -> Alarms:
    """Uniform requests over `models` models for `seconds` at `rate` a second."""
    clock, events = Clock(), EventLog()
    alarms = Alarms(events)
    memory = MemoryTier(MemoryBudget(BASELINE + ROOM * MODEL, BASELINE), LRUPolicy(), clock=clock)
    sizing = Sizing(memory, events, clock)
    server = LruServer(sizing, events, clock, newcomers_go)
    rng = random.Random(seed)
    while clock.now < seconds:
        server.request(f"m{rng.randrange(models)}")
        clock.now += 1 / rate
    sizing.roll()
    return alarms


def test_oversized_working_set_sets_the_alarm() -> None:
    """A working set twice the room sets the thrash alarm off, with its numbers."""
    alarms = serve(models=2 * ROOM, seconds=3 * WINDOW_S)
    assert [reason for reason, _ in alarms] == ["started"]
    detail = alarms[0][1]
    assert float(str(detail["early_returns"])) >= 0.1 * float(str(detail["requests"]))
    assert 0 < float(str(detail["cache_age_s"])) < WINDOW_S
    # LRU over 20 models needs room for about all of them to hit 95% of the requests
    needed = float(str(detail["memory_needed_bytes_for_0.95"]))
    assert BASELINE + 15 * MODEL < needed < BASELINE + 25 * MODEL


def test_a_working_set_that_fits_never_sets_it_off() -> None:
    assert serve(models=ROOM, seconds=3 * WINDOW_S) == []


def test_the_alarm_fires_when_newcomers_go_first() -> None:
    """A frequency policy evicts newcomers a moment after loading them; the cache's age is
    still how long it keeps a model unused, so the returns count as early."""
    alarms = serve(models=2 * ROOM, seconds=3 * WINDOW_S, newcomers_go=True)
    assert [reason for reason, _ in alarms] == ["started"]


def test_the_alarm_ends_when_the_working_set_fits_again() -> None:
    clock, events = Clock(), EventLog()
    alarms = Alarms(events)
    memory = MemoryTier(MemoryBudget(BASELINE + ROOM * MODEL, BASELINE), LRUPolicy(), clock=clock)
    sizing = Sizing(memory, events, clock)
    server = LruServer(sizing, events, clock)
    rng = random.Random(1)
    for models in (2 * ROOM, ROOM // 2):
        until = clock.now + 3 * WINDOW_S
        while clock.now < until:
            server.request(f"m{rng.randrange(models)}")
            clock.now += 0.02
    sizing.roll()
    assert [reason for reason, _ in alarms] == ["started", "ended"]
    assert not sizing.thrash.thrashing


def test_the_readings_say_what_the_budget_needs() -> None:
    """Models used in turn, 18 of them, with room for 10: LRU misses every request; twice the
    room hits them all, and 95% of hits needs the room of about 18 models."""
    clock, events = Clock(), EventLog()
    memory = MemoryTier(MemoryBudget(BASELINE + ROOM * MODEL, BASELINE), LRUPolicy(), clock=clock)
    sizing = Sizing(memory, events, clock)
    for i in range(4000):
        sizing.used(f"m{i % 18}", MODEL, hit=False)
        clock.now += 0.01
    stats = sizing.statistics()
    assert stats.room_bytes == ROOM * MODEL
    assert stats.predicted_hit_ratio == pytest.approx(0.0, abs=0.01)
    assert stats.hit_ratio_at_factor[0.5] == pytest.approx(0.0, abs=0.01)
    assert stats.hit_ratio_at_factor[2.0] == pytest.approx(0.995, abs=0.01)
    assert stats.budget_needed[0.95] == pytest.approx(BASELINE + 18 * MODEL, rel=0.1)
    assert stats.instances_needed[0.95] == pytest.approx(1.8, rel=0.1)
    assert stats.observed_hit_ratio == 0.0
    assert stats.sample_rate == 1.0
    assert stats.curve[-1].hit_ratio == pytest.approx(0.995, abs=0.01)


def test_no_curve_when_sizing_names_is_zero() -> None:
    clock, events = Clock(), EventLog()
    memory = MemoryTier(MemoryBudget(BASELINE + ROOM * MODEL, BASELINE), LRUPolicy(), clock=clock)
    sizing = Sizing(memory, events, clock, max_names=0)
    sizing.used("m0", MODEL, hit=True)
    stats = sizing.statistics()
    assert stats.curve == () and stats.predicted_hit_ratio is None
    assert stats.observed_hit_ratio == 1.0


def test_a_hot_model_says_its_share_since_it_became_hot() -> None:
    """Its requests since then and all of the instance's: a share that does not depend on when
    it became hot, which a router can turn into a rate."""
    clock, events = Clock(), EventLog()
    memory = MemoryTier(MemoryBudget(BASELINE + ROOM * MODEL, BASELINE), LRUPolicy(), clock=clock)
    sizing = Sizing(memory, events, clock)
    rng = random.Random(0)
    for _ in range(4000):
        sizing.used("m0" if rng.random() < 0.75 else "m1", MODEL, hit=True)
        clock.now += 0.01
    hot = sizing.statistics().hot_models
    assert all(0 < h.instance_requests < sizing.requests for h in hot)
    shares = {h.name: h.requests / h.instance_requests for h in hot}
    assert shares == pytest.approx({"m0": 0.75, "m1": 0.25}, abs=0.03)


def test_reads_between_uses_change_nothing_read() -> None:
    """Uses are counted a few dozen at a time, and every read counts those held first: a sizing
    read after each use ends where one read only at the end does."""
    sizings = []
    for read_each_use in (True, False):
        clock, events = Clock(), EventLog()
        memory = MemoryTier(MemoryBudget(BASELINE + ROOM * MODEL, BASELINE), LRUPolicy(), clock)
        sizing = Sizing(memory, events, clock)
        rng = random.Random(0)
        for _ in range(500):
            sizing.used(f"m{rng.randrange(30)}", MODEL, hit=rng.random() < 0.8)
            clock.now += 0.05
            if read_each_use:
                assert sizing.statistics().requests == sizing.requests
        sizings.append(sizing.statistics())
    assert sizings[0] == sizings[1]
    assert sizings[0].observed_hit_ratio is not None and sizings[0].curve
