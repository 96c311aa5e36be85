"""A worker's models on its devices: moves there and back, each measured by the allocator.

The first move to a device makes the worker's context there, whose size is reported once; the
frontend charges it once per worker and device.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from modelhost.errors import ModelhostError
from modelhost.workers.devices import Device, open_devices
from modelhost.workers.handlers.base import Handler
from modelhost.workers.messages import DeviceInfo, OnDevice, OnHost


@dataclass
class Growth:
    """What a first call on a device took past the weights, and the driver's count after it."""

    bytes: int = 0
    process_bytes: int = 0
    models_bytes: int = 0


@dataclass
class Placed:
    """A model on a device: bytes moved, and charged with its first call's."""

    device: Device
    moved_bytes: int
    charged_bytes: int
    by_driver: bool  # its runtime has an allocator of its own
    measured: bool = False


class ModelUse:
    """A move of a model waits for its calls under way, and its calls for the move."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._calls: Counter[str] = Counter()
        self._moving: set[str] = set()

    @contextlib.contextmanager
    def call(self, model: str) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: model not in self._moving)
            self._calls[model] += 1
        try:
            yield
        finally:
            with self._changed:
                self._calls[model] -= 1
                if not self._calls[model]:
                    del self._calls[model]
                    self._changed.notify_all()

    @contextlib.contextmanager
    def move(self, model: str) -> Iterator[None]:
        with self._changed:
            self._moving.add(model)  # first: later calls wait
            self._changed.wait_for(lambda: not self._calls[model])
        try:
            yield
        finally:
            with self._changed:
                self._moving.discard(model)
                self._changed.notify_all()


class DeviceMoves:
    """Which of this worker's models is on which device, with the bytes it was charged."""

    def __init__(self, devices: dict[str, Device]) -> None:
        self.devices = devices
        self.contexts: set[str] = set()  # devices this worker has made its context on
        self.placed: dict[str, Placed] = {}
        self.moves = 0  # started, ever: a move during a measured call spoils its peak
        self.moving = 0  # under way now (moves run on the unloader thread alone)
        self.use = ModelUse()
        self.reported: dict[str, int] = {}  # by device: the last count a call sent

    def infos(self) -> tuple[DeviceInfo, ...]:
        return tuple(device.info() for device in self.devices.values())

    def to_device(self, model: str, handler: Handler, device_name: str) -> OnDevice:
        started = time.perf_counter()
        device = self.devices.get(device_name)
        if device is None or not handler.device_capable:
            raise ModelhostError(
                f"model {model} cannot move to {device_name}: the worker has "
                f"{sorted(self.devices) or 'no devices'}, and its runtime "
                f"{'can' if handler.device_capable else 'cannot'} use one"
            )
        if model in self.placed:
            raise ModelhostError(f"model {model} is already on {self.placed[model].device.name}")
        context = 0 if device_name in self.contexts else device.open_context()
        self.contexts.add(device_name)
        with self._move(model):
            grown = device.move_in(handler)
        self.placed[model] = Placed(device, grown, grown, by_driver=not handler.torch_allocator)
        process = device.process_bytes()
        return OnDevice(grown, context, elapsed_ms(started), process, self.models_bytes(device))

    def models_bytes(self, device: Device) -> int:
        """What this worker's models on `device` are charged."""
        return sum(p.charged_bytes for p in list(self.placed.values()) if p.device is device)

    @contextlib.contextmanager
    def call(self, model: str) -> Iterator[Growth]:
        """Around a call, no move of its model meanwhile: on its first, its activations' peak;
        the driver's count after a first, or where it changed."""
        if not self.devices:
            yield Growth()
            return
        with self.use.call(model):
            placed = self.placed.get(model)
            if placed is None:
                yield Growth()
                return
            first = not placed.measured
            with self._first_call(placed) if first else contextlib.nullcontext(Growth()) as growth:
                yield growth
            self._count(placed.device, growth, changed_only=not first)

    @contextlib.contextmanager
    def _first_call(self, placed: Placed) -> Iterator[Growth]:
        growth = Growth()
        placed.measured = True
        device, moves, busy = placed.device, self.moves, self.moving
        # an arena keeps what a run took, so the driver's count after the call is its peak
        peak = device.process_bytes if placed.by_driver else device.peak_bytes
        base = device.process_bytes() if placed.by_driver else device.start_peak()
        yield growth
        if busy or self.moving or self.moves != moves:  # other weights came or went meanwhile
            placed.measured = False
        else:
            growth.bytes = max(0, peak() - base)
            placed.charged_bytes += growth.bytes

    def _count(self, device: Device, growth: Growth, *, changed_only: bool) -> None:
        """The driver's count after a call; none during a move, whose weights it would count."""
        if self.moving:
            return
        process = device.process_bytes()
        if changed_only and process == self.reported.get(device.name):
            return
        self.reported[device.name] = process
        growth.process_bytes, growth.models_bytes = process, self.models_bytes(device)

    @contextlib.contextmanager
    def _move(self, model: str) -> Iterator[None]:
        with self.use.move(model):
            self.moves += 1
            self.moving += 1
            try:
                yield
            finally:
                self.moving -= 1

    def to_host(self, model: str, handler: Handler) -> OnHost:
        started = time.perf_counter()
        placed = self.placed.pop(model)
        device = placed.device
        with self._move(model):
            device.move_out(handler, placed.moved_bytes)
        return OnHost(elapsed_ms(started), device.process_bytes(), self.models_bytes(device))

    def forget(self, model: str, handler: Handler) -> None:
        """An unloaded model's weights leave its device with it."""
        if model in self.placed:
            self.to_host(model, handler)


def elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def worker_devices(spec: str) -> DeviceMoves:
    """The devices `spec` names (--devices), for a worker to move its models to."""
    return DeviceMoves(open_devices(spec))
