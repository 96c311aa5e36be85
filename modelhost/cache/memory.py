"""The memory tier: which models hold how many bytes against the memory budget.

No I/O, so its invariants are tested directly: a granted reservation stays within the budget, and
a victim is loaded, idle and unpinned.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from modelhost.cache.admission import FrequencySketch, no_more_frequent
from modelhost.cache.order import LazyOrder
from modelhost.cache.policy import Admit, EvictionPolicy, LRUPolicy

DRIFT_READINGS = 32


@dataclass(frozen=True)
class FrontendAllowance:
    """The frontend's size at start and allowed growth, charged whole so no model pays."""

    start_bytes: int
    growth_bytes: int

    @property
    def bytes(self) -> int:
        return self.start_bytes + self.growth_bytes

    def charged(self, frontend_bytes: int) -> int:
        return max(frontend_bytes, self.bytes)


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

    @property
    def worker_id(self) -> int | None:
        return self.workers[0] if self.workers else None

    @property
    def evictable(self) -> bool:
        return self.state is State.LOADED and self.in_flight == 0 and not self.pinned


class MemoryTier:
    def __init__(
        self,
        budget_bytes: int,
        baseline_bytes: int,
        policy: EvictionPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        admission: FrequencySketch | None = None,
        min_residency_s: float = 0.0,
        drift_seed_bytes: int = 0,
        headroom_floor_bytes: int = 0,
        frontend: FrontendAllowance | None = None,
    ) -> None:
        self.budget_bytes = budget_bytes
        self.frontend = frontend
        self.frontend_bytes = frontend.start_bytes if frontend else 0
        baseline_bytes += frontend.growth_bytes if frontend else 0
        self.baseline_bytes = baseline_bytes
        self.policy = policy or LRUPolicy()
        self.clock = clock
        self.admission = admission
        self.min_residency_s = min_residency_s
        self.residents: dict[str, Resident] = {}
        # running totals, so a load with room, placement and a listing read no other resident
        self._all_bytes = 0
        self._held_bytes = 0  # of residents whose bytes no reservation took over
        self._leaving_bytes = 0  # of those, unloading
        self._unsettled = 0  # residents loading or unloading
        self._by_worker: Counter[int] = Counter()  # footprints held, by worker
        self._copied: set[Resident] = set()  # held by more than one worker
        self._reserved = itertools.count()
        self._by_policy = LazyOrder(self.policy.key, self._loaded)
        self._by_use = LazyOrder(lambda r: r.last_used, self._loaded)
        self.released_bytes = 0  # ever, so `observe` sees a reading that raced a release
        self.awaited: Counter[str] = Counter()  # a load serves its waiters before it is a victim
        self.drift: deque[int] = deque([drift_seed_bytes], maxlen=DRIFT_READINGS)
        self.recent_baselines: deque[int] = deque([baseline_bytes], maxlen=DRIFT_READINGS)
        self.headroom_floor_bytes = headroom_floor_bytes

    def __iter__(self) -> Iterator[Resident]:
        return iter(list(self.residents.values()))

    def longest_idle_s(self) -> float:
        """The longest any loaded model has gone unused."""
        idlest = self._by_use.first()
        return self.clock() - idlest.last_used if idlest else 0.0

    def _loaded(self, resident: Resident) -> bool:
        return resident.state is State.LOADED and self.residents.get(resident.name) is resident

    def get(self, name: str) -> Resident | None:
        return self.residents.get(name)

    @property
    def committed_bytes(self) -> int:
        """The baseline plus every model in memory; a victim counts in its load's reservation."""
        return self.baseline_bytes + self._held_bytes

    @property
    def leaving_bytes(self) -> int:
        """Held by models unloading for no load; no victim is chosen for them."""
        return self._leaving_bytes

    def copied(self) -> list[Resident]:
        """The models held by more than one worker."""
        return list(self._copied)

    def held_by_worker(self) -> dict[int, int]:
        """The footprints of the copies each worker holds."""
        return dict(self._by_worker)

    def _count(self, resident: Resident, sign: int) -> None:
        self._all_bytes += sign * resident.bytes
        self._unsettled += sign * (resident.state is not State.LOADED)
        if not resident.room_taken:
            self._held_bytes += sign * resident.bytes
            if resident.state is State.UNLOADING:
                self._leaving_bytes += sign * resident.bytes
        for worker_id in resident.workers:
            self._by_worker[worker_id] += sign * resident.footprint
        if len(resident.workers) > 1:
            (self._copied.add if sign > 0 else self._copied.discard)(resident)

    @contextlib.contextmanager
    def _changing(self, resident: Resident) -> Iterator[None]:
        """Around every change to a resident's bytes, state, room or workers: the totals follow."""
        counted = self.residents.get(resident.name) is resident
        if counted:
            self._count(resident, -1)
        try:
            yield
        finally:
            if counted:
                self._count(resident, +1)

    @property
    def headroom_bytes(self) -> int:
        """Room left for growth no reading has shown yet: the largest recent rise, or the floor."""
        return max(self.headroom_floor_bytes, *self.drift)

    def shortfall_bytes(self, size_bytes: int) -> int:
        """Over the budget less headroom with `size_bytes` more; 0 or less fits."""
        return self.committed_bytes + size_bytes - (self.budget_bytes - self.headroom_bytes)

    @property
    def capacity_bytes(self) -> int:
        return self.budget_bytes - self.baseline_bytes - self.headroom_floor_bytes

    @property
    def unreserved_bytes(self) -> int:
        return self.budget_bytes - self.headroom_floor_bytes - self.committed_bytes

    def fits_ever(self, size_bytes: int) -> bool:
        return size_bytes <= self.capacity_bytes

    def reserve(self, name: str, size_bytes: int, pinned: bool = False) -> list[Resident] | None:
        """The victims to unload for a load, or None while too busy.

        Until `victims_gone` the reservation holds the victims' bytes, still in memory.
        """
        self.record_access(name)
        victims = self.load_victims(name, size_bytes)
        if victims is None:
            return None
        freed = sum(victim.bytes for victim in victims)
        if size_bytes - freed > self.unreserved_bytes:
            return None  # models leaving will make the room: wait, evict no more
        for victim in self._claim(victims):
            with self._changing(victim):
                victim.room_taken = True
        if (replaced := self.residents.get(name)) is not None:
            self._count(replaced, -1)
        resident = self.residents[name] = Resident(
            name, max(size_bytes, freed), pinned, last_used=self.clock(), seq=next(self._reserved)
        )
        self._count(resident, +1)
        return victims

    def victims_gone(self, resident: Resident, size_bytes: int) -> None:
        """The reservation's victims are gone: it keeps `size_bytes`."""
        if self.residents.get(resident.name) is not resident:
            return  # removed meanwhile, and its bytes with it
        self.released_bytes += resident.bytes - size_bytes
        with self._changing(resident):
            resident.bytes = size_bytes

    @property
    def frontend_excess_bytes(self) -> int:
        return max(0, self.frontend_bytes - self.frontend.bytes) if self.frontend else 0

    def observe(
        self, real_bytes: int, released_before: int, frontend_bytes: int | None = None
    ) -> None:
        """Fold the measured PSS into the baseline: what the models do not explain.

        Bytes released during the reading are taken off, or churn would raise it for good.
        """
        if frontend_bytes is not None and self.frontend is not None:
            self.frontend_bytes = frontend_bytes
            real_bytes += self.frontend.charged(frontend_bytes) - frontend_bytes
        raced = self.released_bytes - released_before
        settled = not raced and not self._unsettled
        unexplained = max(0, real_bytes - raced - self._all_bytes)
        self.drift.append(max(0, unexplained - max(self.recent_baselines)))
        self.baseline_bytes = unexplained if settled else max(self.baseline_bytes, unexplained)
        self.recent_baselines.append(self.baseline_bytes)

    def victims_for(self, size_bytes: int) -> list[Resident] | None:
        """Ignores minimum residency and admission: being over budget comes first."""
        return self._choose(size_bytes, settled_only=False)

    def load_victims(self, name: str, size_bytes: int) -> list[Resident] | None:
        """Models past the minimum residency, so two cannot take turns evicting each other."""
        return self._choose(size_bytes, name, settled_only=True)

    def _choose(
        self, size_bytes: int, name: str | None = None, settled_only: bool = False
    ) -> list[Resident] | None:
        """Victims for `size_bytes` and the headroom, else the floor alone, walked in the
        policy's order only when something must go.

        A load never waits for the learned headroom: readings that move it wake no one.
        """
        soft = self.shortfall_bytes(size_bytes) - self.leaving_bytes
        learned = self.headroom_bytes - self.headroom_floor_bytes
        for shortfall in (soft, soft - learned):
            if shortfall <= 0:
                return []
            if self.admission is not None and name is not None:
                rarer = no_more_frequent(self.admission, name)
                if (chosen := self._take(shortfall, settled_only, rarer)) is not None:
                    return chosen
            if (chosen := self._take(shortfall, settled_only)) is not None:
                return chosen
        return None

    def _take(
        self, need_bytes: int, settled_only: bool, admit: Admit | None = None
    ) -> list[Resident] | None:
        now = self.clock()
        walk = self._by_policy.walk()
        try:
            candidates = (
                r
                for r in walk
                if self._candidate(r) and (not settled_only or self._settled(r, now))
            )
            return self.policy.take(candidates, need_bytes, admit)
        finally:
            walk.close()  # what it walked goes back, in its place

    def _candidate(self, resident: Resident) -> bool:
        return resident.evictable and not self.awaited[resident.name]

    def _settled(self, resident: Resident, now: float) -> bool:
        loaded_at_s = resident.loaded_at_s
        return loaded_at_s is not None and now - loaded_at_s >= self.min_residency_s

    def record_access(self, name: str) -> None:
        if self.admission is not None:
            self.admission.record(name)

    def mark_loaded(self, name: str, worker_id: int, footprint_bytes: int, load_ms: float) -> None:
        resident = self.residents[name]
        self.released_bytes += max(0, resident.bytes - footprint_bytes)
        with self._changing(resident):
            resident.state, resident.workers = State.LOADED, [worker_id]
            resident.bytes = resident.footprint = footprint_bytes
        resident.loaded_at, resident.load_ms = time.time(), load_ms
        resident.loaded_at_s = resident.last_used = self.clock()
        self.policy.touched(resident)
        self._by_policy.add(resident)
        self._by_use.add(resident)

    def reserve_copy(self, resident: Resident, peak_bytes: int) -> int | None:
        """Bytes for one more copy (footprint or load peak) if they fit without evicting."""
        reserved = max(resident.footprint, peak_bytes)
        if self.shortfall_bytes(reserved) > 0:
            return None
        with self._changing(resident):
            resident.bytes += reserved
        return reserved

    def add_copy(self, resident: Resident, worker_id: int) -> None:
        with self._changing(resident):
            resident.workers.append(worker_id)

    def remove_copy(self, resident: Resident, worker_id: int) -> None:
        with self._changing(resident):
            resident.workers.remove(worker_id)

    def release_copy(self, resident: Resident, size_bytes: int | None = None) -> None:
        """A copy's footprint, or `size_bytes` of a reservation it did not use."""
        size = resident.footprint if size_bytes is None else size_bytes
        with self._changing(resident):
            resident.bytes -= size
        self.released_bytes += size

    def begin_unload(self, name: str) -> Resident:
        resident = self.residents[name]
        with self._changing(resident):
            resident.state = State.UNLOADING
        return resident

    def remove(self, name: str) -> Resident | None:
        resident = self.residents.pop(name, None)
        if resident is not None:
            self._count(resident, -1)
            self._by_policy.forget(name)
            self._by_use.forget(name)
            self.released_bytes += resident.bytes
        return resident

    def overflow_victims(self) -> list[Resident]:
        return self._claim(self.victims_for(0) or [])

    def idle_victims(self, idle_s: float) -> list[Resident]:
        """Walked from the least recently used, to the first used since the cutoff."""
        cutoff = self.clock() - idle_s
        walk = self._by_use.walk()
        try:
            idle = itertools.takewhile(lambda r: r.last_used <= cutoff, walk)
            return self._claim([r for r in idle if self._candidate(r)])
        finally:
            walk.close()

    def _claim(self, victims: list[Resident]) -> list[Resident]:
        """So no other reservation picks them."""
        for victim in victims:
            with self._changing(victim):
                victim.state = State.UNLOADING
        return victims

    def begin_request(self, resident: Resident) -> None:
        if resident.hits:  # a load's first request was counted by its reserve
            self.record_access(resident.name)
        resident.in_flight += 1
        resident.hits += 1
        resident.last_used = self.clock()
        self.policy.touched(resident)
        self._by_policy.touched(resident)

    def end_request(self, resident: Resident) -> None:
        resident.in_flight -= 1
