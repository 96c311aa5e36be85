"""Holds under any interleaving of the host (`machine.py`): workers die running one of their
models' batches or loads, the thread named, while requests, loads, copies and unloads overlap.
a and b are t1's, c and d t2's; a tenant is held at two deaths' worth, so that runs of 30 steps
reach it. After every step no model held back, nor any model of a tenant held back, is loaded:
not one whose load was under way as its hold began."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from host.fakes import NAMES, RecordedEvents
from host.machine import Interleavings, Step, checked, replay, runs_of_30_steps
from host.test_tenant_quotas import tenant_of
from modelhost.cache.memory import State
from modelhost.workers.messages import Load
from modelhost.workers.running import BATCH, LOAD, Record


class HeldBackInterleavings(Interleavings):
    tenant_of = staticmethod(tenant_of)

    def __init__(self) -> None:
        super().__init__()
        self.held_back = self.host.residency.held_back
        self.held_back.tenants.held_at = 2.0
        self.held_back.events = self.holds = RecordedEvents()

    @precondition(lambda self: self.pool.workers)
    @rule(worker=st.integers(0, 1), suspect=st.integers(0, 3), respawn=st.booleans())
    def a_worker_dies_running_a_model(self, worker: int, suspect: int, respawn: bool) -> None:
        """Its dump names the thread: one of its models' batch, or its load, alone."""
        handle = list(self.pool.workers.values())[worker % len(self.pool.workers)]
        loading = [
            call.request.model
            for call in self.pool.calls
            if call.worker is handle and isinstance(call.request, Load)
        ]
        suspects = sorted(handle.models) + loading
        if suspects:
            model = suspects[suspect % len(suspects)]
            if model in loading:
                handle.died_running = Record(frozenset(), model, (LOAD, model))
            else:
                handle.died_running = Record(frozenset({model}), "", (BATCH, model))
        self.loop.call_soon(self.pool.kill, handle, respawn)  # in the loop, as the pool's reader
        self.settle()

    def held(self) -> set[str]:
        """The models held back now, their own or their tenant's hold."""
        tenants = set(self.held_back.held_s())
        models = {
            model
            for kind, model, _ in self.holds.emitted
            if kind == "failure" and model and self.host.residency.failed_loads.recall(model)
        }
        return models | {name for name in NAMES if tenant_of(name) in tenants}

    @checked
    def nothing_held_back_is_loaded(self) -> None:
        loaded = {r.name for r in self.memory if r.state is State.LOADED}
        assert not loaded & self.held(), (loaded, self.holds.emitted)


HeldBackInterleavings.TestCase.settings = runs_of_30_steps(300)
TestHoldsUnderAnyInterleaving = HeldBackInterleavings.TestCase


def dies_running(worker: int) -> Step:
    """Worker `worker` (by its place in the pool) dies running its first model."""
    return ("a_worker_dies_running_a_model", {"worker": worker, "suspect": 0, "respawn": True})


def test_a_load_under_way_as_its_tenant_is_held_back_is_unloaded() -> None:
    """a's batches kill its worker twice while b loads on the other: t1 is held with b's load
    under way, and b's callers get the hold, not b loaded."""
    replay(
        [
            ("request", {"name": "a"}),
            ("answer_a_call", {"index": 0}),  # a's load
            dies_running(0),  # a's batch
            ("request", {"name": "a"}),
            ("answer_a_call", {"index": 0}),
            ("request", {"name": "b"}),  # its load goes to the other worker
            dies_running(0),
            ("answer_a_call", {"index": 0}),  # b's load ends, its tenant held
        ],
        HeldBackInterleavings,
    )
