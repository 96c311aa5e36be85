"""One device's budget, its workers' contexts and its models, with running totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class Placement(str, Enum):
    ARRIVING = "arriving"  # reserved: moves in once its victims have left
    AWAKE = "awake"
    LEAVING = "leaving"  # moving to host memory, where it sleeps
    STRANDED = "stranded"  # its move out failed: charged until its copy leaves the worker


@dataclass(eq=False)
class OnDevice:
    """A model's place on a device; `bytes` are charged to the device's budget."""

    name: str
    device: str
    worker_id: int
    bytes: int
    state: Placement = Placement.ARRIVING
    last_used: float = 0.0
    hits: int = 0
    load_ms: float | None = None  # the last move in: what the policy weighs a return by
    room_taken: bool = False  # a victim whose bytes its newcomer's reservation holds
    victims: list[OnDevice] = field(default_factory=list)  # arriving: those yet to leave


@dataclass(eq=False)
class DeviceMemory:
    """A device's budget and what is charged to it; `held_bytes` is read, written only here."""

    name: str
    budget_bytes: int
    total_bytes: int
    context_estimate_bytes: int  # a context not measured yet
    contexts: dict[int, int] = field(default_factory=dict)  # bytes, by worker
    made: set[int] = field(default_factory=set)  # workers whose context a move has made
    models: dict[tuple[str, int], OnDevice] = field(default_factory=dict)  # by (model, worker)
    held_bytes: int = 0  # contexts and models, less victims a reservation holds for
    wakes: int = 0
    evictions: int = 0

    @property
    def spare_bytes(self) -> int:
        return self.budget_bytes - self.held_bytes

    def context_charge(self, worker_id: int) -> int:
        """What a first move from `worker_id` adds for its context."""
        return 0 if worker_id in self.contexts else self.context_estimate_bytes

    def charge_context(self, worker_id: int, size_bytes: int) -> None:
        self.held_bytes += size_bytes - self.contexts.get(worker_id, 0)
        self.contexts[worker_id] = size_bytes

    def drop_context(self, worker_id: int) -> None:
        self.held_bytes -= self.contexts.pop(worker_id, 0)
        self.made.discard(worker_id)

    def drop_unmade_context(self, worker_id: int) -> None:
        """An estimate charged for a context no move has made, with nothing left to make it."""
        waiting = any(r.worker_id == worker_id for r in self.models.values())
        if worker_id not in self.made and not waiting:
            self.drop_context(worker_id)

    def lends_context(self, worker_id: int) -> bool:
        """Whether a newcomer of `worker_id` waits for victims whose room counts its context,
        which no other move of that worker may make before the victims have left."""
        waiting = (r.victims for r in self.models.values() if r.worker_id == worker_id)
        return worker_id not in self.made and any(waiting)

    def copies_of(self, name: str) -> int:
        return sum(1 for model, _ in self.models if model == name)

    def holds(self, record: OnDevice) -> bool:
        return self.models.get((record.name, record.worker_id)) is record

    def add(self, record: OnDevice) -> None:
        self.models[record.name, record.worker_id] = record
        self.held_bytes += record.bytes

    def remove(self, record: OnDevice) -> None:
        """Drop the record; a newcomer's victims still here count again as their own."""
        if self.holds(record):
            del self.models[record.name, record.worker_id]
            self.held_bytes -= 0 if record.room_taken else record.bytes
        for victim in record.victims:
            if self.holds(victim) and victim.room_taken:
                victim.room_taken = False
                self.held_bytes += victim.bytes
        record.victims = []

    def resize(self, record: OnDevice, size_bytes: int) -> None:
        if not record.room_taken and self.holds(record):
            self.held_bytes += size_bytes - record.bytes
        record.bytes = size_bytes

    def claim(self, victim: OnDevice, room_taken: bool) -> None:
        """Mark it leaving; a reservation that counts its bytes takes them off the total."""
        victim.state = Placement.LEAVING
        if room_taken and not victim.room_taken:
            victim.room_taken = True
            self.held_bytes -= victim.bytes
