"""workers_per_model as a floor, through the same interleaving machine as the host's
other lifecycles: a model is loaded on the floor's workers, scale-in keeps them, and every
invariant of tests/host/machine.py holds with the floor's copies arriving."""

from __future__ import annotations

import dataclasses

from host.machine import Interleavings, replay, runs_of_30_steps
from modelhost.cache.memory import State
from modelhost.host.scaling import Scaling
from modelhost.workers.messages import Load


class FloorInterleavings(Interleavings):
    """The machine of the host's interleavings, with workers_per_model 2 on its two workers."""

    def __init__(self) -> None:
        super().__init__()
        scaling = self.host.scaling
        scaling.scheduling = dataclasses.replace(scaling.scheduling, min_workers_per_model=2)


FloorInterleavings.TestCase.settings = runs_of_30_steps(100)
TestTheFloorUnderAnyInterleaving = FloorInterleavings.TestCase


def test_first_load_fills_the_floor() -> None:
    """A first load brings the floor's copies, and scale-in keeps them."""
    machine = FloorInterleavings()
    try:
        machine.run_steps([("request", {"name": "b"}), ("answer_a_call", {"index": 0})])
        copy = [c for c in machine.pool.calls if isinstance(c.request, Load)]
        assert len(copy) == 1, machine.pool.calls  # the second copy, unasked by any pressure
        machine.pool.answer(copy[0])
        machine.settle()
        resident = machine.memory.get("b")
        assert resident is not None and resident.state is State.LOADED
        assert len(resident.workers) == 2
        machine.run_steps([("time_passes", {"seconds": 10.0}), ("scale_in", {})])
        assert len(resident.workers) == 2  # idle past scale_in_idle_s: the floor stays
    finally:
        machine.teardown()


def test_load_skips_worker_with_leaving_copy() -> None:
    """A fresh load never claims a worker that still holds a copy on its way out."""
    replay(
        [
            ("request", {"name": "a"}),
            ("answer_a_call", {"index": 0}),
            ("request", {"name": "a"}),
            ("request", {"name": "b"}),
            ("request", {"name": "c"}),
            ("kill_a_worker", {"worker": 0}),
            ("answer_a_call", {"index": 0}),
        ],
        FloorInterleavings,
    )


def test_floor_copy_reserves_its_peak() -> None:
    """A floor copy reserves its load's peak, not only its footprint."""
    replay(
        [
            ("request", {"name": "a"}),
            ("request", {"name": "c"}),
            ("answer_a_call", {"index": 0}),
            ("answer_a_call", {"index": 0}),
            ("a_call_fails", {"index": 0}),
            ("answer_a_call", {"index": 0}),
            ("a_call_fails", {"index": 0}),
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),
        ],
        FloorInterleavings,
    )


def test_a_floor_copy_waits_for_a_worker_that_is_loading() -> None:
    """A floor's copy whose only spare worker is loading another model loads when that ends,
    rather than never: PUT min_worker answered one copy of three under load."""
    machine = FloorInterleavings()
    try:
        machine.run_steps([("request", {"name": "a"}), ("request", {"name": "b"})])
        first_a, first_b = [c for c in machine.pool.calls if isinstance(c.request, Load)]
        machine.pool.answer(first_a)
        machine.settle()  # a's floor copy wants the worker b's load holds
        machine.pool.answer(first_b)
        machine.settle()
        copies = sorted(c.request.model for c in machine.pool.calls if isinstance(c.request, Load))
        assert copies == ["a", "b"], machine.pool.calls
    finally:
        machine.teardown()


def test_scale_in_drops_an_idle_copy_and_asks_of_no_model_held_once() -> None:
    """Scale-in runs every second: it looks at the models held by more than one worker only,
    not at every loaded model (a server may hold thousands)."""
    machine = FloorInterleavings()
    try:
        scaling = machine.host.scaling
        for name, floor in (("a", 1), ("b", 2)):  # a held by one worker, b by both
            set_floor(scaling, floor)
            machine.run_steps([("request", {"name": name})])
            answer_every_call(machine)  # its load, its floor's copy, the request
        set_floor(scaling, 1)  # b's second copy is above it now
        a, b = machine.memory.get("a"), machine.memory.get("b")
        assert a is not None and b is not None and a.state is b.state is State.LOADED
        assert (len(a.workers), len(b.workers)) == (1, 2)
        asked: list[str] = []
        floor_of = scaling.floor_of
        scaling.floor_of = lambda name: asked.append(name) or floor_of(name)  # type: ignore[method-assign]
        machine.run_steps([("time_passes", {"seconds": 10.0}), ("scale_in", {})])
        assert asked == ["b"]
        answer_every_call(machine)  # the copy's unload
        assert (len(a.workers), len(b.workers)) == (1, 1)  # b's copy above the floor went
    finally:
        machine.teardown()


def test_a_copy_draining_while_the_other_copys_worker_dies_stays() -> None:
    """A copy dropped for max_worker is kept when the worker of the model's other copy dies
    while it drains: unloading it left the model loaded on no worker, and requests hung."""
    replay(
        [
            ("request", {"name": "a"}),
            ("answer_a_call", {"index": 0}),  # loaded on worker 1: the floor's copy starts
            ("answer_a_call", {"index": 0}),  # the copy on worker 2, while 1 runs a's batch
            ("request", {"name": "a"}),  # runs on worker 2
            ("put_min_worker", {"name": "a", "copies": 1, "limit": 1}),  # drains worker 2's copy
            ("request", {"name": "a"}),  # waits for a free copy
            ("kill_a_worker", {"worker": 0, "respawn": True}),  # worker 1 and its copy die
        ],
        FloorInterleavings,
    )


def set_floor(scaling: Scaling, floor: int) -> None:
    scaling.scheduling = dataclasses.replace(scaling.scheduling, min_workers_per_model=floor)


def answer_every_call(machine: FloorInterleavings) -> None:
    while machine.pool.calls:
        machine.pool.answer(machine.pool.calls[0])
        machine.settle()
