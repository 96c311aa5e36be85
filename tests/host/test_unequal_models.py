"""The host's interleavings with models of unequal sizes: a load of a small model may evict a
large one, freeing more than it reserves, while the large one is still in its worker. Every
invariant of tests/host/machine.py holds, what the workers really hold included."""

from __future__ import annotations

from host.fakes import FOOTPRINT_BYTES
from host.machine import Interleavings, arrives, replay, runs_of_30_steps


def twice_larger_a(name: str) -> int:
    return 2 * FOOTPRINT_BYTES if name == "a" else FOOTPRINT_BYTES


class UnequalInterleavings(Interleavings):
    """The host's machine with `a` twice the other models' size (its artifact too)."""

    footprint = staticmethod(twice_larger_a)


UnequalInterleavings.TestCase.settings = runs_of_30_steps(200)
TestUnequalModelsUnderAnyInterleaving = UnequalInterleavings.TestCase


def test_eviction_frees_nothing_before_victims_go() -> None:
    """A load evicting more than it reserves frees no room before its victims are gone."""
    loaded = [
        (rule, {"name": name} if rule == "request" else {"index": 0})
        for name in "bacd"  # d's first load, estimated at 25 MiB, evicts b
        for rule in ("request", "answer_a_call", "answer_a_call")
    ]
    replay(
        [
            *loaded,  # a, c and d: 48 of 64 MiB
            ("request", {"name": "b"}),  # evicts a: its unload waits for its worker
            ("request", {"name": "c"}),
            ("time_passes", {"seconds": 0.5}),
            ("request", {"name": "c"}),  # c is busy: a copy, if there is room
        ],
        UnequalInterleavings,
    )


def test_loading_copy_stays_counted_after_death() -> None:
    """A copy loading when its model's last worker dies keeps its reservation."""
    replay(
        [
            ("request", {"name": "c"}),
            arrives("put", "b", call=0),
            arrives("put", "a", call=0),
            ("kill_a_worker", {"worker": 1}),  # b's loaded copy; its second still loads
            ("request", {"name": "a"}),
        ],
        UnequalInterleavings,
    )


def test_an_evicted_model_counts_until_its_leaving_copy_is_gone() -> None:
    """c's extra copy is leaving worker 2 when c is evicted from worker 1: the eviction keeps c
    counted until worker 2 lets go too, so a copy of a loaded in its room waits."""
    replay(
        [
            ("request", {"name": "c"}),
            ("request", {"name": "c"}),
            arrives("request", "a", call=0, turns=1),
            arrives("request", "a", call=37, fails=True),
            *[("request", {"name": "a"})] * 4,
            ("request", {"name": "b"}),
            arrives("put", "c", call=1),
            arrives("request", "c", call=0),
            ("request", {"name": "d"}),
            arrives("request", "a", call=0),
            ("request", {"name": "a"}),
            arrives("request", "a", call=1),
            arrives("request", "a", call=1),
            arrives("request", "a", call=26),
            arrives("put", "a", call=2, fails=True),  # a copy of a, while c still leaves worker 2
        ],
        UnequalInterleavings,
    )
