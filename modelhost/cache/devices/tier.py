"""The device tier: reservations for moves to a device, the victims they send to sleep.

A reservation goes to the device with the most room, else to the first whose idle models the
policy can send to host memory. Until they have left, the newcomer's record holds the victims'
bytes, so a device never passes its budget. Each copy of a model has its own record, and a
device holds at most `copies_per_device` copies of a model.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterator

from modelhost.cache.devices.ledger import DeviceMemory, OnDevice, Placement
from modelhost.cache.policy import EvictionPolicy, LRUPolicy, choose

REMEMBERED_FOOTPRINTS = 4096  # names whose measured device bytes outlive their record
Idle = Callable[[str], bool]  # whether a model has no request in flight
Copy = tuple[str, int]  # a model, and the worker holding this copy of it


class DeviceTier:
    """The devices, the models on each, and the footprints measured there."""

    def __init__(
        self,
        devices: list[DeviceMemory],
        policy: EvictionPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        copies_per_device: int = 1,
    ) -> None:
        self.devices = {device.name: device for device in devices}
        self.copies_per_device = copies_per_device
        self.policy = policy or LRUPolicy()
        self.clock = clock
        self.placed: dict[Copy, OnDevice] = {}
        self.asleep: set[Copy] = set()  # left a device for host memory, still loaded there
        self._measured: OrderedDict[str, int] = OrderedDict()

    def __bool__(self) -> bool:
        return bool(self.devices)

    def __iter__(self) -> Iterator[DeviceMemory]:
        return iter(self.devices.values())

    def of(self, name: str, worker_id: int) -> OnDevice | None:
        return self.placed.get((name, worker_id))

    def estimate(self, name: str, host_bytes: int) -> int:
        """Bytes a move of `name` will take: its last measure, else its host footprint."""
        return self._measured.get(name, host_bytes)

    def candidates(self, pinned: str | None, name: str = "") -> list[DeviceMemory]:
        """Devices a copy of `name` may go to, the least used first: those with room for one
        more copy of it."""
        if pinned is not None:
            devices = [self.devices[pinned]] if pinned in self.devices else []
        else:
            devices = sorted(self, key=lambda device: device.spare_bytes, reverse=True)
        return [d for d in devices if d.copies_of(name) < self.copies_per_device]

    def fits_ever(self, size_bytes: int, device: DeviceMemory, worker_id: int) -> bool:
        """Whether the model fits the device's budget with nothing else on it."""
        others = device.contexts.get(worker_id, device.context_estimate_bytes)
        return size_bytes + others <= device.budget_bytes

    def room_can_be_made(self, size_bytes: int, device: DeviceMemory, worker_id: int) -> bool:
        """Whether sleeps could make room: the stranded stay, and other workers' contexts."""
        kept = sum(m.bytes for m in device.models.values() if m.state is Placement.STRANDED)
        contexts = sum(size for worker, size in device.contexts.items() if worker != worker_id)
        return self.fits_ever(size_bytes + kept + contexts, device, worker_id)

    def reserve(
        self, name: str, size_bytes: int, worker_id: int, pinned: str | None, idle: Idle
    ) -> tuple[OnDevice, list[OnDevice]] | None:
        """A record on a device for a move from `worker_id`, and the victims that must leave
        first; None while no device has the room or enough idle models to make it, or while
        the copy's earlier record is still leaving (one record a copy)."""
        if (name, worker_id) in self.placed:
            return None
        for device in self.candidates(pinned, name):
            if device.lends_context(worker_id) or not self.fits_ever(size_bytes, device, worker_id):
                continue
            victims = self._victims(device, size_bytes + device.context_charge(worker_id), idle)
            if victims is not None:
                return self._take(device, name, size_bytes, worker_id, victims), victims
        return None

    def _victims(self, device: DeviceMemory, need_bytes: int, idle: Idle) -> list[OnDevice] | None:
        lacking = need_bytes - device.spare_bytes
        if lacking <= 0:
            return []
        awake = [m for m in device.models.values() if m.state is Placement.AWAKE and idle(m.name)]
        return choose(self.policy, awake, lacking)

    def _take(
        self,
        device: DeviceMemory,
        name: str,
        size_bytes: int,
        worker_id: int,
        victims: list[OnDevice],
    ) -> OnDevice:
        """Claim the victims and add the record, holding their bytes until they have left."""
        context = device.context_charge(worker_id)
        freed = sum(victim.bytes for victim in victims)
        for victim in victims:
            device.claim(victim, room_taken=True)
        device.charge_context(worker_id, device.contexts.get(worker_id, context))
        record = OnDevice(name, device.name, worker_id, max(size_bytes, freed - context))
        record.last_used, record.victims = self.clock(), list(victims)
        device.add(record)
        self.placed[name, worker_id] = record
        return record

    def victims_gone(self, record: OnDevice, size_bytes: int) -> None:
        """Its victims have left: it keeps `size_bytes`."""
        record.victims = []
        self.devices[record.device].resize(record, size_bytes)

    def moved_in(
        self, record: OnDevice, device_bytes: int, context_bytes: int, move_ms: float
    ) -> None:
        """The worker measured the move (and the context it made, if it made one)."""
        device = self.devices[record.device]
        device.resize(record, device_bytes)
        device.made.add(record.worker_id)
        if context_bytes:
            device.charge_context(record.worker_id, context_bytes)
            device.context_estimate_bytes = max(device.context_estimate_bytes, context_bytes)
        record.state, record.load_ms = Placement.AWAKE, move_ms
        self.asleep.discard((record.name, record.worker_id))
        self._remember(record.name, device_bytes)

    def grown(self, record: OnDevice, grown_bytes: int) -> None:
        """Its first call took `grown_bytes` past its weights: they are its from now on."""
        size = record.bytes + grown_bytes
        self.devices[record.device].resize(record, size)
        self._remember(record.name, size)

    def counted(
        self, device_name: str, worker_id: int, process_bytes: int, models_bytes: int
    ) -> None:
        """The driver counts `process_bytes` for the worker there, `models_bytes` of it its
        models' as the worker charged them then: the rest is its context's."""
        device = self.devices[device_name]
        if process_bytes <= 0 or worker_id not in device.contexts:
            return
        context = max(0, process_bytes - models_bytes)
        device.charge_context(worker_id, context)
        device.context_estimate_bytes = max(device.context_estimate_bytes, context)

    def used(self, record: OnDevice) -> None:
        record.hits += 1
        record.last_used = self.clock()
        self.policy.touched(record)

    def slept(self, record: OnDevice) -> None:
        """It left its device for host memory."""
        if self.drop(record):
            self.devices[record.device].evictions += 1
            self.asleep.add((record.name, record.worker_id))

    def strand(self, record: OnDevice) -> None:
        """Its move out failed in a live worker: its weights may still be there."""
        if self.placed.get((record.name, record.worker_id)) is record:
            record.state = Placement.STRANDED

    def stranded(self, name: str, worker_id: int) -> bool:
        record = self.placed.get((name, worker_id))
        return record is not None and record.state is Placement.STRANDED

    def woke(self, record: OnDevice) -> None:
        self.devices[record.device].wakes += 1

    def drop(self, record: OnDevice) -> bool:
        """Forget the record, if it is still its copy's; whether it was."""
        key = (record.name, record.worker_id)
        if self.placed.get(key) is not record:
            return False
        del self.placed[key]
        device = self.devices[record.device]
        device.remove(record)
        device.drop_unmade_context(record.worker_id)
        return True

    def unloaded(self, name: str) -> None:
        """The model left host memory, and every device with it."""
        for copy in [copy for copy in {*self.placed, *self.asleep} if copy[0] == name]:
            self.copy_unloaded(*copy)

    def copy_unloaded(self, name: str, worker_id: int) -> bool:
        """One copy of the model left host memory, and its device with it; whether a device
        held it."""
        self.asleep.discard((name, worker_id))
        record = self.placed.get((name, worker_id))
        if record is not None:
            self.drop(record)
        return record is not None

    def worker_lost(self, worker_id: int) -> None:
        for name, worker in [copy for copy in {*self.placed, *self.asleep} if copy[1] == worker_id]:
            self.copy_unloaded(name, worker)
        for device in self:
            device.drop_context(worker_id)

    def overflow(self, device_name: str, idle: Idle) -> list[OnDevice]:
        """Claimed idle victims for the bytes a measure put past the budget."""
        device = self.devices[device_name]
        victims = self._victims(device, 0, idle) or []
        for victim in victims:
            device.claim(victim, room_taken=False)
        return victims

    def _remember(self, name: str, device_bytes: int) -> None:
        self._measured[name] = device_bytes
        self._measured.move_to_end(name)
        if len(self._measured) > REMEMBERED_FOOTPRINTS:
            self._measured.popitem(last=False)
