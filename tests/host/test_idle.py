"""Which models the idle watch unloads, and how often it looks: a quarter of the shortest idle
time in force."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from modelhost.cache.memory import MemoryBudget, MemoryTier, Resident
from modelhost.cache.policy import LRUPolicy
from modelhost.host.idle import check_interval_s
from modelhost.testing import StepClock

MiB = 2**20


def load_aged(memory: MemoryTier, clock: StepClock, ages_s: dict[str, float]) -> None:
    """Each model loaded, and last used `ages_s[name]` seconds before the clock's next reading."""
    now = clock.now
    for name, age_s in sorted(ages_s.items(), key=lambda item: -item[1]):
        clock.now = now - age_s
        memory.reserve(name, MiB)
        memory.mark_loaded(name, 1, MiB, 1.0)
    clock.now = now


def idle_names(own_s: dict[str, float], server_s: float, ages_s: dict[str, float]) -> list[str]:
    clock = StepClock()
    clock.now = 10_000.0
    memory = MemoryTier(MemoryBudget(1000 * MiB, 0), LRUPolicy(), clock)
    load_aged(memory, clock, ages_s)
    return sorted(r.name for r in memory.victims.idle(server_s, own_s))


def test_a_model_leaves_after_its_own_idle_time_else_the_server_s() -> None:
    ages_s = {"brief": 20, "patient": 200, "plain": 120, "kept": 5000, "fresh": 1}
    own_s = {"brief": 10.0, "patient": 3600.0, "kept": 0.0, "unloaded": 1.0}
    assert idle_names(own_s, 100.0, ages_s) == ["brief", "plain"]


def test_with_no_server_time_only_the_models_with_their_own_leave() -> None:
    ages_s = {"brief": 20, "plain": 5000}
    assert idle_names({"brief": 10.0}, 0.0, ages_s) == ["brief"]


def test_the_watch_walks_no_model_it_could_not_unload(monkeypatch: pytest.MonkeyPatch) -> None:
    """With one model setting its own time, every loaded model was walked each look: with
    thousands loaded, a fifth of the frontend's second, as the replica watch's walk was."""

    def every_resident(memory: MemoryTier) -> Iterator[Resident]:
        raise AssertionError("walked every loaded model")

    monkeypatch.setattr(MemoryTier, "__iter__", every_resident)
    ages_s = {f"m{n}": 1.0 for n in range(100)} | {"brief": 20}
    assert idle_names({"brief": 10.0}, 3600.0, ages_s) == ["brief"]


def test_a_models_shorter_idle_time_quickens_the_watch() -> None:
    assert check_interval_s(60.0, {"brief": 2.0, "kept": 0.0}, 1.0) == 0.5


def test_with_no_idle_time_in_force_the_watch_idles_at_its_slowest() -> None:
    assert check_interval_s(0.0, {"kept": 0.0}, 1.0) == 1.0
