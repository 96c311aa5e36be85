"""Each device-capable model's way onto a device and off it, to sleep in host memory.

A loaded model moves to its device before its first request is dispatched. Room is made by
sending idle models back to host memory in their own worker, still loaded and still charged
to the memory budget, so waking one is a copy, not a load. Moves are single-flight per copy;
a request waits for its model's first copy until the deadline, then gets a 507 naming the device.
Scale-out copies: docs/decisions.md, "A hot model's copies go to other devices".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from modelhost.cache.devices import DeviceTier, OnDevice, Placement
from modelhost.cache.memory import MemoryTier, State
from modelhost.errors import InsufficientDeviceMemory, ModelhostError, ModelNotLoaded, Unavailable
from modelhost.host.changes import Changes
from modelhost.host.seams import Pool
from modelhost.host.under_way import UnderWay
from modelhost.records.events import EventLog
from modelhost.records.statistics import DeviceStatistics
from modelhost.units import format_bytes
from modelhost.workers.messages import Answered, Loaded, OnHost, ToDevice, ToHost
from modelhost.workers.messages import OnDevice as MovedIn
from modelhost.workers.replies import ReplyT


@dataclass(frozen=True)
class Readiness:
    """Where a request's model was when it came: `device`, or `host` (asleep, or on the CPU);
    `move_ms`: the move to its device that the request waited for."""

    tier: str
    move_ms: float = 0.0


ON_DEVICE = Readiness("device")
ON_HOST = Readiness("host")


class DevicePlacement:
    """Moves models to devices and back; the only writer of the device tier's records."""

    def __init__(
        self,
        tier: DeviceTier,
        memory: MemoryTier,
        pool: Pool,
        *,
        events: EventLog,
        changes: Changes,
        deadline_s: float,
        pin_of: Callable[[str], str | None],
    ) -> None:
        self.tier, self.memory, self.pool, self.events = tier, memory, pool, events
        self.changes, self.deadline_s, self.pin_of = changes, deadline_s, pin_of
        self.capable: dict[str, list[int]] = {}  # models a device can hold → their copies'
        self.weights: dict[str, int] = {}  # their weights' bytes, the first move's estimate
        self.moves: UnderWay[Readiness] = UnderWay()  # of each model's first copy
        self.spreading: dict[tuple[str, int], asyncio.Future[None]] = {}  # its other copies
        self.relieving: set[asyncio.Future[None]] = set()

    def loaded(self, name: str, worker_id: int, loaded: Loaded) -> None:
        """A model loaded in `worker_id`; it goes to a device unless pinned to the CPU."""
        if loaded.device_capable and self.tier:
            self.capable.setdefault(name, []).append(worker_id)
            self.weights[name] = loaded.tensor_bytes

    async def ready(self, name: str) -> Readiness:
        """The model on its device before a request of it is dispatched, waking it if asleep."""
        if name not in self.capable:
            return ON_HOST
        first, *others = self.capable[name]
        for worker_id in others:
            self._spread(name, worker_id)
        record = self.tier.of(name, first)
        if record is not None and record.state is Placement.AWAKE:
            self.tier.used(record)
            return ON_DEVICE
        task = self.moves.get(name) or self.moves.start(name, self._move_in(name))
        return await asyncio.shield(task)

    def _spread(self, name: str, worker_id: int) -> None:
        """Its copy in `worker_id` on a device too, if one has room or idle models to send
        to sleep; touched as used while there, since requests go to every copy."""
        record = self.tier.of(name, worker_id)
        if record is not None:
            if record.state is Placement.AWAKE:
                self.tier.used(record)
            return
        if (name, worker_id) in self.spreading:
            return
        size = self.tier.estimate(name, self.weights.get(name, 0))
        got = self.tier.reserve(name, size, worker_id, self.pin_of(name), self._idle)
        if got is None:
            return  # no device can take it now: it runs on the CPU, and is tried again
        move = asyncio.ensure_future(self._move_copy(*got, size))
        self.spreading[name, worker_id] = move
        move.add_done_callback(lambda _: self.spreading.pop((name, worker_id), None))

    async def _move_copy(self, record: OnDevice, victims: list[OnDevice], size: int) -> None:
        """A copy's move: on failure it stays on the CPU; a worker's death is the pool's."""
        with contextlib.suppress(ModelhostError):
            await self._move(record, victims, size)

    def _idle(self, name: str) -> bool:
        resident = self.memory.get(name)
        return resident is not None and resident.state is State.LOADED and not resident.in_flight

    async def _move_in(self, name: str) -> Readiness:
        copies = self.capable.get(name)
        if not copies:  # left before the task began
            raise ModelhostError(f"model {name} was unloaded while it waited for a device")
        worker_id = copies[0]
        spread = self.spreading.get((name, worker_id))
        if spread is not None:  # its move began while another copy was the first
            await asyncio.wait({spread})
            record = self.tier.of(name, worker_id)
            if record is not None and record.state is Placement.AWAKE:
                self.tier.used(record)
                return ON_DEVICE
            return await self._move_in(name)
        size = self.tier.estimate(name, self.weights.get(name, 0))
        got = await self._reserve(name, size, worker_id)
        if got is None:
            return ON_HOST
        return await self._move(*got, size)

    async def _move(self, record: OnDevice, victims: list[OnDevice], size: int) -> Readiness:
        """Send the victims to sleep, then move the copy in."""
        name, worker_id = record.name, record.worker_id
        sleeps = (self._sleep(victim, self.tier.policy.name) for victim in victims)
        if not all(await asyncio.gather(*sleeps)):
            self._drop(record)  # a victim stayed: its room is its own
            return ON_HOST
        self.tier.victims_gone(record, size)
        try:
            moved = await self._call(worker_id, ToDevice(name, record.device), MovedIn, name)
        except ModelhostError as error:
            return self._stays_on_host(record, error)
        except BaseException:
            self._drop(record)
            raise
        wake = (name, worker_id) in self.tier.asleep  # else its first move
        self.tier.moved_in(record, moved.device_bytes, moved.context_bytes, moved.move_ms)
        self.tier.used(record)
        if wake:
            self.tier.woke(record)
        self._emit("wake" if wake else "place", record, moved.move_ms, moved.context_bytes)
        if moved.process_bytes:  # the driver's count beside the ledger's
            self.events.emit(
                "device_check",
                name,
                bytes=moved.process_bytes,
                reason="nvml",
                worker=worker_id,
                detail={"device": record.device, "charged_bytes": self._charged(record)},
            )
        self.tier.counted(record.device, worker_id, moved.process_bytes, moved.models_bytes)
        await self._relieve(record.device)
        return Readiness("host", moved.move_ms)

    def _charged(self, record: OnDevice) -> int:
        """What the tier charges the device for the worker's context and models there."""
        device = self.tier.devices[record.device]
        models = sum(r.bytes for r in device.models.values() if r.worker_id == record.worker_id)
        return device.contexts.get(record.worker_id, 0) + models

    async def _reserve(
        self, name: str, size: int, worker_id: int
    ) -> tuple[OnDevice, list[OnDevice]] | None:
        """A place on a device; waits for models to go idle until the deadline, then 507;
        None where its other copies hold every place."""
        pinned = self.pin_of(name)
        self._check_fits(name, size, worker_id, pinned)
        deadline = self.tier.clock() + self.deadline_s
        while (got := self.tier.reserve(name, size, worker_id, pinned, self._idle)) is None:
            if not self._may_wait(name, size, worker_id, pinned):
                return None
            remaining = deadline - self.tier.clock()
            if remaining <= 0:
                raise InsufficientDeviceMemory(self._busy(name, size, pinned))
            await self.changes.next(remaining)
            if name not in self.capable:
                raise ModelhostError(f"model {name} was unloaded while it waited for a device")
        return got

    def _may_wait(self, name: str, size: int, worker_id: int, pinned: str | None) -> bool:
        """Whether models going idle could make room."""
        devices = self.tier.candidates(pinned, name)
        can = any(self.tier.room_can_be_made(size, device, worker_id) for device in devices)
        return can and not self.tier.stranded(name, worker_id)

    def _drop(self, record: OnDevice) -> None:
        self.tier.drop(record)
        self.changes.notify()

    def _stays_on_host(self, record: OnDevice, error: ModelhostError) -> Readiness:
        """A move the worker refused: the model runs on the CPU from now on, said once.

        A worker's death is raised instead, for the invoke path's retry.
        """
        self._drop(record)
        if isinstance(error, Unavailable):
            raise error
        self._forget_copy(record.name, record.worker_id)
        self.events.emit(
            "failure",
            record.name,
            reason="device_move",
            worker=record.worker_id,
            detail={"device": record.device, "error": str(error), "runs_on": "cpu"},
        )
        return ON_HOST

    def _check_fits(self, name: str, size: int, worker_id: int, pinned: str | None) -> None:
        devices = self.tier.candidates(pinned)
        if not any(self.tier.fits_ever(size, device, worker_id) for device in devices):
            where = pinned or ", ".join(d.name for d in self.tier) or "no device"
            budgets = ", ".join(f"{d.name} {format_bytes(d.budget_bytes)}" for d in devices)
            raise InsufficientDeviceMemory(
                f"model {name} needs {format_bytes(size)} on a device, more than the budget of "
                f"{where} holds with a worker's context ({budgets or 'no such device'}); set "
                '--device-budget higher, or pin it to the CPU with device = "cpu" in its '
                "modelhost.toml"
            )

    def _busy(self, name: str, size: int, pinned: str | None) -> str:
        used = ", ".join(
            f"{d.name} {format_bytes(d.held_bytes)} of {format_bytes(d.budget_bytes)}"
            for d in self.tier.candidates(pinned)
        )
        return (
            f"model {name} needs {format_bytes(size)} on a device, and for {self.deadline_s:g} s "
            f"every model that could make room was busy ({used}); retry, raise "
            "--device-budget, or pin some models to the CPU"
        )

    async def _sleep(self, record: OnDevice, reason: str) -> bool:
        """Send a victim's weights to host memory, in its worker; whether they left."""
        try:
            moved = await self._call(record.worker_id, ToHost(record.name), OnHost, record.name)
        except ModelhostError as error:
            left = self._nothing_left(record, error)
            self.tier.drop(record) if left else self._strand(record, error)
            self.changes.notify()
            return left
        self.tier.slept(record)
        process, models = moved.process_bytes, moved.models_bytes
        self.tier.counted(record.device, record.worker_id, process, models)
        self._emit("sleep", record, moved.move_ms, reason=reason)
        self.changes.notify()
        return True

    def _nothing_left(self, record: OnDevice, error: ModelhostError) -> bool:
        """Whether a failed move out leaves nothing on the device: its worker or model went."""
        gone = record.worker_id not in self.pool.workers
        return gone or isinstance(error, (Unavailable, ModelNotLoaded))

    def _strand(self, record: OnDevice, error: ModelhostError) -> None:
        self.tier.strand(record)
        self.events.emit(
            "failure",
            record.name,
            reason="device_move",
            worker=record.worker_id,
            detail={"device": record.device, "error": str(error), "stays_charged": True},
        )

    async def _relieve(self, device: str) -> None:
        """Send idle models to sleep while a measure put the device past its budget."""
        victims = self.tier.overflow(device, self._idle)
        await asyncio.gather(*(self._sleep(v, "device_pressure") for v in victims))

    async def _call(
        self, worker_id: int, request: ToDevice | ToHost, expect: type[ReplyT], name: str
    ) -> ReplyT:
        worker = self.pool.workers.get(worker_id)
        if worker is None:
            raise ModelhostError(f"the worker holding model {name} has gone")
        reply, _ = await self.pool.call(worker, request, expect, model=name)
        return reply

    def unloaded(self, name: str) -> None:
        """The model left host memory: its device record goes too."""
        self.weights.pop(name, None)
        if self.capable.pop(name, None) is not None:
            self.tier.unloaded(name)
            self.changes.notify()

    def grown(self, name: str, worker_id: int, measured: Answered) -> None:
        """A call of its copy measured on the device: charged, and relieved."""
        record = self.tier.of(name, worker_id)
        if record is None or record.state is not Placement.AWAKE:
            return
        self.tier.grown(record, measured.device_grown)
        process, models = measured.device_process, measured.device_models
        self.tier.counted(record.device, worker_id, process, models)
        relief = asyncio.ensure_future(self._relieve(record.device))
        self.relieving.add(relief)  # a task nobody holds may be collected
        relief.add_done_callback(self.relieving.discard)

    async def copy_leaving(self, name: str, worker_id: int) -> None:
        """A copy leaves `worker_id`: the next copy becomes the first.

        A move that has its place ends first: the worker would take the unload before it."""
        record = self.tier.of(name, worker_id)
        if record is not None and record.state is Placement.ARRIVING:
            first = self.capable.get(name, [None])[0] == worker_id
            moves = (self.spreading.get((name, worker_id)), self.moves.get(name) if first else None)
            if under_way := {move for move in moves if move is not None and not move.done()}:
                await asyncio.wait(under_way)  # its outcome is its requests' to read
        if worker_id in self.capable.get(name, ()):
            self._forget_copy(name, worker_id)

    def copy_left(self, name: str, worker_id: int) -> None:
        """The worker answered the copy's unload, or died: its device's room is free."""
        if self.tier.copy_unloaded(name, worker_id):
            self.changes.notify()

    def _forget_copy(self, name: str, worker_id: int) -> None:
        copies = self.capable.get(name, [])
        if worker_id in copies:
            copies.remove(worker_id)
        if not copies:
            self.capable.pop(name, None)
            self.weights.pop(name, None)

    def worker_lost(self, worker_id: int) -> None:
        for name in [n for n, workers in self.capable.items() if worker_id in workers]:
            self._forget_copy(name, worker_id)
        self.tier.worker_lost(worker_id)

    def _emit(
        self,
        kind: str,
        record: OnDevice,
        move_ms: float,
        context_bytes: int = 0,
        reason: str = "invoked",
    ) -> None:
        detail: dict[str, object] = {"device": record.device}
        if kind == "sleep":
            detail["to"] = "host"  # still loaded in its worker
        if context_bytes:
            detail["context_bytes"] = context_bytes
        self.events.emit(
            kind,
            record.name,
            bytes=record.bytes,
            reason=reason,
            worker=record.worker_id,
            duration_ms=move_ms,
            detail=detail,
        )


def device_statistics(tier: DeviceTier) -> tuple[DeviceStatistics, ...]:
    """Each device's figures, from the tier's running totals."""
    return tuple(
        DeviceStatistics(
            name=device.name,
            budget_bytes=device.budget_bytes,
            used_bytes=device.held_bytes,
            context_bytes=sum(device.contexts.values()),
            models=len(device.models),
            asleep=len(tier.asleep),
            wakes=device.wakes,
            evictions=device.evictions,
        )
        for device in tier
    )
