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


def test_a_load_evicting_more_than_it_reserves_frees_nothing_before_its_victims_go() -> None:
    """What put the e2e churn test over its budget in CI: b (known, 18 MiB at its peak) evicts
    a (24 MiB); the 6 MiB between looked free while a was still in its worker, and a copy of c
    (18 MiB at its peak) started in them. In the server the copy was a load on the other worker,
    and a's unload waited behind it on that worker's loader thread."""
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


def test_a_copy_loading_when_its_models_last_worker_dies_stays_counted() -> None:
    """Found by the machine: b's only loaded copy died with its worker while a copy of b was
    loading on the other worker; b's record went, and with it the copy's reservation, so a load
    of a (36 MiB at its peak) started beside the copy still unpickling (18 MiB): 66 of 64 MiB."""
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
