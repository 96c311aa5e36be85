"""The device tier under any interleaving of reservations, sleeps, moves, uses, unloads and
lost workers, each step in whatever order Hypothesis picks, with copies of a model in several
workers going to several devices.

Checked after every step: each device's running total is its contexts and records recounted;
what is charged never passes the budget; what is really on the device (contexts, awake models,
victims still leaving, newcomers whose victims have left) never does either; a victim was awake
and idle on its newcomer's device when chosen; no device holds more copies of a model than
`--workers-per-device` lets it.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from modelhost.cache.devices import DeviceMemory, DeviceTier, OnDevice, Placement
from modelhost.cache.policy import LRUPolicy

MiB = 2**20
NAMES = ("a", "b", "c", "d", "e", "f")
WORKERS = (1, 2, 3)
Copy = tuple[str, int]
COPIES_PER_DEVICE = 2  # of one model (--workers-per-device)
CONTEXT_BYTES = 2 * MiB


class DeviceInterleavings(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        devices = [
            DeviceMemory(f"cuda:{i}", size * MiB, 48 * MiB, CONTEXT_BYTES)
            for i, size in enumerate((40, 16, 30))
        ]
        self.tier = DeviceTier(devices, LRUPolicy(), self.clock, COPIES_PER_DEVICE)
        self.busy: set[str] = set()
        self.pending: dict[Copy, tuple[OnDevice, list[OnDevice], int]] = {}  # victims not gone
        self.moving: dict[Copy, tuple[OnDevice, int]] = {}  # victims gone, move under way

    def clock(self) -> float:
        self.now += 1.0
        return self.now

    def idle(self, name: str) -> bool:
        return name not in self.busy

    @rule(
        name=st.sampled_from(NAMES),
        size_mib=st.sampled_from((6, 12, 18)),
        worker=st.sampled_from(WORKERS),
    )
    def reserve(self, name: str, size_mib: int, worker: int) -> None:
        if (name, worker) in self.tier.placed:
            return  # one record a copy: the host moves a copy once at a time
        got = self.tier.reserve(name, size_mib * MiB, worker, None, self.idle)
        if got is None:
            return
        record, victims = got
        for victim in victims:
            assert victim.device == record.device and self.idle(victim.name)
            self.moving.pop((victim.name, victim.worker_id), None)
        self.pending[name, worker] = (record, victims, size_mib * MiB)

    @rule(
        name=st.sampled_from(NAMES),
        size_mib=st.sampled_from((6, 12, 18)),
        worker=st.sampled_from(WORKERS),
    )
    def place(self, name: str, size_mib: int, worker: int) -> None:
        """Reserve, send the victims to sleep and move in, in one step: devices fill up."""
        self.reserve(name, size_mib, worker)
        if (name, worker) in self.pending:
            self._leave((name, worker))
        if (name, worker) in self.moving:
            record, size = self.moving.pop((name, worker))
            made = worker not in self.tier.devices[record.device].made
            self.tier.moved_in(record, size, CONTEXT_BYTES if made else 0, 1.0)

    @precondition(lambda self: self.pending)
    @rule(data=st.data())
    def victims_leave(self, data: st.DataObject) -> None:
        self._leave(data.draw(st.sampled_from(sorted(self.pending))))

    def _leave(self, copy: Copy) -> None:
        record, victims, size = self.pending.pop(copy)
        for victim in victims:
            self.tier.slept(victim)
        self.tier.victims_gone(record, size)
        if self.tier.of(*copy) is record:
            self.moving[copy] = (record, size)

    @precondition(lambda self: self.moving)
    @rule(data=st.data(), measured=st.floats(0.5, 1.0), fails=st.booleans())
    def moved(self, data: st.DataObject, measured: float, fails: bool) -> None:
        copy = data.draw(st.sampled_from(sorted(self.moving)))
        record, size = self.moving.pop(copy)
        if self.tier.of(*copy) is not record:
            return
        if fails:
            self.tier.drop(record)
            return
        made = record.worker_id not in self.tier.devices[record.device].contexts
        self.tier.moved_in(record, int(size * measured), CONTEXT_BYTES if made else 0, 1.0)

    @rule(name=st.sampled_from(NAMES), worker=st.sampled_from(WORKERS))
    def toggle_busy(self, name: str, worker: int) -> None:
        record = self.tier.of(name, worker)
        if name in self.busy:
            self.busy.discard(name)
        elif record is not None and record.state is Placement.AWAKE:
            self.busy.add(name)
            self.tier.used(record)

    @rule(name=st.sampled_from(NAMES))
    def unload(self, name: str) -> None:
        if name in self.busy:
            return  # an unload waits for requests in flight
        self.tier.unloaded(name)
        for copy in [c for c in {*self.pending, *self.moving} if c[0] == name]:
            self.pending.pop(copy, None)
            self.moving.pop(copy, None)

    @rule(name=st.sampled_from(NAMES), worker=st.sampled_from(WORKERS))
    def copy_unloaded(self, name: str, worker: int) -> None:
        """Scale-in takes one copy away; the model's other copies keep their places."""
        others = {r for (n, w), r in self.tier.placed.items() if n == name and w != worker}
        self.tier.copy_unloaded(name, worker)
        self.pending.pop((name, worker), None)
        self.moving.pop((name, worker), None)
        assert others <= set(self.tier.placed.values())

    @rule(worker=st.sampled_from(WORKERS))
    def worker_lost(self, worker: int) -> None:
        lost = {copy for copy in self.tier.placed if copy[1] == worker}
        self.tier.worker_lost(worker)
        for copy in lost:
            self.pending.pop(copy, None)
            self.moving.pop(copy, None)
        assert all(w != worker for _, w in self.tier.placed)

    @invariant()
    def totals_are_recounted(self) -> None:
        for device in self.tier:
            models = sum(r.bytes for r in device.models.values() if not r.room_taken)
            assert device.held_bytes == sum(device.contexts.values()) + models
            assert all(self.tier.placed[copy] is r for copy, r in device.models.items())
            assert all(r.device == device.name for r in device.models.values())

    @invariant()
    def copies_of_a_model_a_device_within_the_limit(self) -> None:
        places = Counter((name, r.device) for (name, _), r in self.tier.placed.items())
        assert all(count <= COPIES_PER_DEVICE for count in places.values())

    @invariant()
    def charged_within_budget(self) -> None:
        for device in self.tier:
            assert device.held_bytes <= device.budget_bytes

    @invariant()
    def really_on_the_device_within_budget(self) -> None:
        for device in self.tier:
            # a newcomer moves in once its own victims have left, at once if it has none
            waiting = {id(r) for r, victims, _ in self.pending.values() if victims}
            there = [r for r in device.models.values() if id(r) not in waiting]
            # a context is made by its worker's first move: one waiting for victims has none yet
            made = device.made | {r.worker_id for r in there}
            contexts = sum(size for worker, size in device.contexts.items() if worker in made)
            assert contexts + sum(r.bytes for r in there) <= device.budget_bytes


DeviceInterleavings.TestCase.settings = settings(max_examples=300, stateful_step_count=40)
TestDeviceTierUnderAnyInterleaving = DeviceInterleavings.TestCase


def test_a_context_made_while_a_newcomer_waits_for_its_victims() -> None:
    """a's copy from worker 2 counts its context into its victims' room; b's copy from the same
    worker, moving in while those victims are still there, must not make that context too."""
    machine = DeviceInterleavings()
    for name, size_mib, worker in [("a", 6, 1), ("c", 6, 1), ("b", 18, 1), ("a", 6, 3)]:
        machine.place(name, size_mib, worker)
    machine.unload("a")
    machine.place("a", 18, 1)
    machine.place("a", 6, 1)
    machine.reserve("a", 18, 2)  # c and a's first copy are its victims, still leaving
    machine.reserve("a", 6, 3)
    machine.place("b", 12, 2)
    machine.totals_are_recounted()
    machine.charged_within_budget()
    machine.really_on_the_device_within_budget()
