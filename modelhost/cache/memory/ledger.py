"""The residents of memory and running totals of their bytes, so that no reading walks them.

Every change to a record goes through the ledger, which takes the record out of its totals
before the change and puts it back after.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum


class State(str, Enum):
    LOADING = "loading"
    LOADED = "loaded"
    UNLOADING = "unloading"


@dataclass(eq=False)
class Resident:
    name: str
    bytes: int  # in all: one footprint per worker holding or loading it
    pinned: bool = False
    state: State = State.LOADING
    workers: list[int] = field(default_factory=list)
    footprint: int = 0  # of one copy
    in_flight: int = 0
    hits: int = 0
    last_used: float = 0.0
    loaded_at: float | None = None  # wall time, for GET /models
    loaded_at_s: float | None = None  # the tier's clock
    load_ms: float | None = None
    room_taken: bool = False  # leaving for a load whose reservation counts its bytes
    seq: int = 0  # when reserved: ties in an order go as in a stable sort of the residents
    tenant: str = ""  # whose model it is: "" while tenants are off
    carried: int = 0  # of its reservation, bytes of other tenants' victims, charged to them
    uncharged: bool = False  # a victim of its own tenant's load, whose reservation counts it

    @property
    def worker_id(self) -> int | None:
        return self.workers[0] if self.workers else None

    @property
    def evictable(self) -> bool:
        return self.state is State.LOADED and self.in_flight == 0 and not self.pinned


class Ledger:
    """The records by name and their totals; the totals are read here and written nowhere else."""

    def __init__(self) -> None:
        self.residents: dict[str, Resident] = {}
        self.all_bytes = 0
        self.held_bytes = 0  # of residents whose bytes no reservation took over
        self.leaving_bytes = 0  # of those, unloading
        self.unsettled = 0  # residents loading or unloading
        self.released_bytes = 0  # ever, so a reading that raced a release is seen
        self.by_worker: Counter[int] = Counter()  # footprints held, by worker
        self.copied: set[Resident] = set()  # held by more than one worker
        self.tenant_bytes: Counter[str] = Counter()  # charged to each tenant
        self.tenant_leaving: Counter[str] = Counter()  # of those, unloading
        self._reserved = itertools.count()

    def current(self, resident: Resident) -> bool:
        """Whether it is still the record of its name."""
        return self.residents.get(resident.name) is resident

    def add(
        self,
        name: str,
        size_bytes: int,
        pinned: bool,
        now: float,
        tenant: str = "",
        carried: int = 0,
    ) -> Resident:
        """A new record for a load, in place of any earlier one."""
        if (replaced := self.residents.get(name)) is not None:
            self._count(replaced, -1)
        seq = next(self._reserved)
        resident = self.residents[name] = Resident(
            name, size_bytes, pinned, last_used=now, seq=seq, tenant=tenant, carried=carried
        )
        self._count(resident, +1)
        return resident

    def remove(self, name: str) -> Resident | None:
        resident = self.residents.pop(name, None)
        if resident is not None:
            self._count(resident, -1)
            self.released_bytes += resident.bytes
        return resident

    def resize(self, resident: Resident, size_bytes: int) -> None:
        """Its bytes become `size_bytes`, all its own; what it gives back counts as released."""
        self.released_bytes += max(0, resident.bytes - size_bytes)
        with self._changing(resident):
            resident.bytes, resident.carried = size_bytes, 0

    def claim(
        self, victims: list[Resident], room_taken: bool = False, uncharged: bool = False
    ) -> list[Resident]:
        """Mark them unloading, so no other reservation picks them."""
        for victim in victims:
            with self._changing(victim):
                victim.state = State.UNLOADING
                victim.room_taken = victim.room_taken or room_taken
                victim.uncharged = victim.uncharged or uncharged
        return victims

    def staying_bytes(self, tenant: str) -> int:
        """Charged to `tenant` and not leaving."""
        return self.tenant_bytes[tenant] - self.tenant_leaving[tenant]

    def loaded(
        self, resident: Resident, worker_id: int, footprint_bytes: int, load_ms: float, now: float
    ) -> None:
        self.released_bytes += max(0, resident.bytes - footprint_bytes)
        with self._changing(resident):
            resident.state, resident.workers = State.LOADED, [worker_id]
            resident.bytes = resident.footprint = footprint_bytes
        resident.loaded_at, resident.load_ms = time.time(), load_ms
        resident.loaded_at_s = resident.last_used = now

    def add_worker(self, resident: Resident, worker_id: int) -> None:
        with self._changing(resident):
            resident.workers.append(worker_id)

    def remove_worker(self, resident: Resident, worker_id: int) -> None:
        with self._changing(resident):
            resident.workers.remove(worker_id)

    def begin_request(self, resident: Resident, now: float) -> None:
        resident.in_flight += 1
        resident.hits += 1
        resident.last_used = now

    def end_request(self, resident: Resident) -> None:
        resident.in_flight -= 1

    def served(self, resident: Resident, count: int, now: float) -> None:
        """`count` requests begun and ended: no longer in flight."""
        resident.hits += count
        resident.last_used = now

    def _count(self, resident: Resident, sign: int) -> None:
        self.all_bytes += sign * resident.bytes
        self.unsettled += sign * (resident.state is not State.LOADED)
        if not resident.room_taken:
            self.held_bytes += sign * resident.bytes
            if resident.state is State.UNLOADING:
                self.leaving_bytes += sign * resident.bytes
        for worker_id in resident.workers:
            self.by_worker[worker_id] += sign * resident.footprint
        if len(resident.workers) > 1:
            (self.copied.add if sign > 0 else self.copied.discard)(resident)
        if not resident.uncharged:
            self._charge(resident, sign * (resident.bytes - resident.carried))

    def _charge(self, resident: Resident, delta_bytes: int) -> None:
        """A tenant's bytes, with no entry kept for a tenant that holds none."""
        tenant = resident.tenant
        self.tenant_bytes[tenant] += delta_bytes
        if not self.tenant_bytes[tenant]:
            del self.tenant_bytes[tenant]
        if resident.state is State.UNLOADING:
            self.tenant_leaving[tenant] += delta_bytes
            if not self.tenant_leaving[tenant]:
                del self.tenant_leaving[tenant]

    @contextlib.contextmanager
    def _changing(self, resident: Resident) -> Iterator[None]:
        """Around every change to a resident's bytes, state, room or workers: the totals follow."""
        counted = self.current(resident)
        if counted:
            self._count(resident, -1)
        try:
            yield
        finally:
            if counted:
                self._count(resident, +1)
