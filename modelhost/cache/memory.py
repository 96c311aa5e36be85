"""The memory tier: which models are loaded where, and what they cost against the memory budget.

Pure bookkeeping with no I/O, so its invariants are tested directly: the committed bytes (the idle
server's baseline plus every model that is loading or loaded) never exceed the budget when a
reservation is granted, and a victim is always loaded, idle and unpinned.

A load's victims are chosen by the eviction policy (`cache/policy.py`) among the evictable models
that have been resident at least `min_residency_s` (so two models cannot take turns evicting each
other on every request); with an admission filter (`cache/admission.py`), among those requested
no more often than the newcomer first. The filter's sketch counts each request once: `reserve`
records a miss (a retry of a waiting load counts again, as demand that keeps waiting),
`begin_request` a hit; the first request served by a fresh load was counted by its `reserve`.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from modelhost.cache.admission import FrequencySketch, admissible
from modelhost.cache.policy import EvictionPolicy, LRUPolicy

DRIFT_READINGS = 32  # the headroom is the largest rise of the baseline over this many readings


@dataclass(frozen=True)
class FrontendAllowance:
    """What the frontend process may use, said at start: its size then and the growth it may have
    (per-name state, buffers). Within it the frontend is charged its allowance, so its growth is
    no model's loss; past it, what it really uses."""

    start_bytes: int
    growth_bytes: int

    @property
    def bytes(self) -> int:
        return self.start_bytes + self.growth_bytes

    def charged(self, frontend_bytes: int) -> int:
        return max(frontend_bytes, self.bytes)


class State(str, Enum):
    """Where a model's record is in its life: loading, loaded, or leaving memory."""

    LOADING = "loading"
    LOADED = "loaded"
    UNLOADING = "unloading"


@dataclass(eq=False)
class Resident:
    """One model's record in the memory tier: the bytes it holds, its workers, its use."""

    name: str
    bytes: int  # held in all: the footprint once per worker holding (or loading) the model
    pinned: bool = False
    state: State = State.LOADING
    workers: list[int] = field(default_factory=list)  # the first loaded it; more are scale-out
    footprint: int = 0  # of one copy, as measured by the worker that loaded it
    in_flight: int = 0
    hits: int = 0
    last_used: float = 0.0
    loaded_at: float | None = None  # wall time, for GET /models
    loaded_at_s: float | None = None  # the tier's monotonic clock, for the minimum residency
    load_ms: float | None = None
    room_taken: bool = False  # leaving for a load, whose reservation holds its bytes meanwhile

    @property
    def worker_id(self) -> int | None:
        return self.workers[0] if self.workers else None

    @property
    def evictable(self) -> bool:
        return self.state is State.LOADED and self.in_flight == 0 and not self.pinned


class MemoryTier:
    """The memory budget's accounting (no I/O): which models hold how many bytes, and which idle
    ones a load may evict."""

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
        # the idle server as measured, its frontend charged its whole allowance from the start
        self.frontend = frontend
        self.frontend_bytes = frontend.start_bytes if frontend else 0  # at the last reading
        baseline_bytes += frontend.growth_bytes if frontend else 0
        self.baseline_bytes = baseline_bytes
        self.policy = policy or LRUPolicy()
        self.clock = clock
        self.admission = admission
        self.min_residency_s = min_residency_s
        self.residents: dict[str, Resident] = {}
        self.released_bytes = 0  # given back by records, ever (see `observe`)
        # requests waiting for a model's load: it serves them before it can be a victim
        self.awaited: Counter[str] = Counter()
        # how far each reading raised the baseline above the recent ones: unannounced growth
        self.drift: deque[int] = deque([drift_seed_bytes], maxlen=DRIFT_READINGS)
        self.recent_baselines: deque[int] = deque([baseline_bytes], maxlen=DRIFT_READINGS)
        self.headroom_floor_bytes = headroom_floor_bytes  # kept however still the readings

    def __iter__(self) -> Iterator[Resident]:
        return iter(list(self.residents.values()))

    def get(self, name: str) -> Resident | None:
        return self.residents.get(name)

    @property
    def committed_bytes(self) -> int:
        """The baseline plus every model that is loading or loaded, or leaving memory: a model
        evicted for a load is counted by that load's reservation until it is gone."""
        held = sum(r.bytes for r in self.residents.values() if not r.room_taken)
        return self.baseline_bytes + held

    @property
    def leaving_bytes(self) -> int:
        """Held by models unloading for no load (DELETE, idle, memory pressure): counted until
        they are gone, but no victim is chosen for their bytes."""
        leaving = (r for r in self.residents.values() if r.state is State.UNLOADING)
        return sum(r.bytes for r in leaving if not r.room_taken)

    @property
    def headroom_bytes(self) -> int:
        """Kept free by reservations: as much as the server grew above its recent baselines
        between two readings, unseen until the second (copy-on-write of the template's pages,
        heap the allocator keeps); reservations that used it would put the server over its
        budget until a reading showed the growth and victims left. Before any reading, the seed
        (new workers grow). A baseline that comes back after a dip (a worker replaced) is no
        growth. Never under the floor: quiet readings do not mean the next step of a heap's
        growth is small."""
        return max(self.headroom_floor_bytes, *self.drift)

    def shortfall_bytes(self, size_bytes: int) -> int:
        """How far committing `size_bytes` more would pass the budget less its headroom (what
        reservations may commit); 0 or less: it fits."""
        return self.committed_bytes + size_bytes - (self.budget_bytes - self.headroom_bytes)

    @property
    def capacity_bytes(self) -> int:
        """What the budget leaves for models once the idle server is paid for, and the
        headroom's floor kept."""
        return self.budget_bytes - self.baseline_bytes - self.headroom_floor_bytes

    @property
    def unreserved_bytes(self) -> int:
        """What a reservation may still commit without a victim: the budget less its headroom's
        floor and all that is committed."""
        return self.budget_bytes - self.headroom_floor_bytes - self.committed_bytes

    def fits_ever(self, size_bytes: int) -> bool:
        return size_bytes <= self.capacity_bytes

    def reserve(self, name: str, size_bytes: int, pinned: bool = False) -> list[Resident] | None:
        """Reserve room for a load; returns the victims to unload first, or None if too busy now.
        Until they are gone (`victims_gone`) the reservation holds their bytes where those are
        more: they are in memory still, and room for other loads once the reservation is not."""
        self.record_access(name)
        victims = self.load_victims(name, size_bytes)
        if victims is None:
            return None
        freed = sum(victim.bytes for victim in victims)
        if size_bytes - freed > self.unreserved_bytes:
            return None  # models leaving will make the room: wait for them, evict no more
        for victim in self._claim(victims):
            victim.room_taken = True
        self.residents[name] = Resident(
            name, max(size_bytes, freed), pinned, last_used=self.clock()
        )
        return victims

    def victims_gone(self, resident: Resident, size_bytes: int) -> None:
        """The victims of `resident`'s reservation are out of memory: it keeps `size_bytes`."""
        if self.residents.get(resident.name) is not resident:
            return  # forgotten meanwhile: its bytes were given back whole
        self.released_bytes += resident.bytes - size_bytes
        resident.bytes = size_bytes

    @property
    def frontend_excess_bytes(self) -> int:
        """How far the frontend has grown past its allowance, at the last reading."""
        return max(0, self.frontend_bytes - self.frontend.bytes) if self.frontend else 0

    def observe(
        self, real_bytes: int, released_before: int, frontend_bytes: int | None = None
    ) -> None:
        """Fold the server's measured PSS into the baseline: what the models do not explain.

        While anything is loading or unloading the figure is in motion, so the baseline may only
        grow then; once all is settled it follows the measurement both ways. A reading takes
        milliseconds: if records gave bytes back meanwhile (`released_before`: the count when it
        began), the reading may still hold them, and they would raise the baseline for good
        under churn; so they are taken off, and what is left can only raise it. The frontend's
        share of the reading (`frontend_bytes`), where known, is charged as its allowance says.
        """
        if frontend_bytes is not None and self.frontend is not None:
            self.frontend_bytes = frontend_bytes
            real_bytes += self.frontend.charged(frontend_bytes) - frontend_bytes
        raced = self.released_bytes - released_before
        settled = not raced and all(r.state is State.LOADED for r in self.residents.values())
        unexplained = max(0, real_bytes - raced - sum(r.bytes for r in self.residents.values()))
        self.drift.append(max(0, unexplained - max(self.recent_baselines)))
        self.baseline_bytes = unexplained if settled else max(self.baseline_bytes, unexplained)
        self.recent_baselines.append(self.baseline_bytes)

    def victims_for(self, size_bytes: int) -> list[Resident] | None:
        """Idle models freeing size_bytes, by the policy alone: memory over the budget (see
        `overflow_victims`) outranks the minimum residency and admission."""
        return self._choose(self._evictable(), size_bytes)

    def load_victims(self, name: str, size_bytes: int) -> list[Resident] | None:
        """Like `victims_for`, among the models resident for the minimum time; with admission,
        those no more frequent than `name` when they can free enough."""
        now = self.clock()
        candidates = [r for r in self._evictable() if self._settled(r, now)]
        return self._choose(candidates, size_bytes, name)

    def _choose(
        self, candidates: list[Resident], size_bytes: int, name: str | None = None
    ) -> list[Resident] | None:
        """The policy's victims among `candidates` (with admission and `name`, the rarer ones
        first) freeing room for `size_bytes` and the headroom, the models leaving memory counted
        as gone (a load waits for them: `reserve`); where they cannot free that much, room that
        keeps the headroom's floor: the learned headroom above it is kept by evicting idle
        models, never by making a load wait (readings, which move it, wake no one)."""
        soft = self.shortfall_bytes(size_bytes) - self.leaving_bytes
        learned = self.headroom_bytes - self.headroom_floor_bytes
        for shortfall in (soft, soft - learned):
            if shortfall <= 0:
                return []
            if self.admission is not None and name is not None:
                rarer = admissible(self.admission, name, candidates)
                if (chosen := self.policy.choose(rarer, shortfall)) is not None:
                    return chosen
            if (chosen := self.policy.choose(candidates, shortfall)) is not None:
                return chosen
        return None

    def _evictable(self) -> list[Resident]:
        """Loaded, idle, unpinned, and not awaited by requests that its load will serve."""
        return [r for r in self.residents.values() if r.evictable and not self.awaited[r.name]]

    def _settled(self, resident: Resident, now: float) -> bool:
        """Resident for at least the minimum residency."""
        loaded_at_s = resident.loaded_at_s
        return loaded_at_s is not None and now - loaded_at_s >= self.min_residency_s

    def record_access(self, name: str) -> None:
        """Count a request for `name` in the admission filter's sketch, if there is one."""
        if self.admission is not None:
            self.admission.record(name)

    def mark_loaded(self, name: str, worker_id: int, footprint_bytes: int, load_ms: float) -> None:
        resident = self.residents[name]
        resident.state, resident.workers = State.LOADED, [worker_id]
        self.released_bytes += max(0, resident.bytes - footprint_bytes)  # its reservation's rest
        resident.bytes = resident.footprint = footprint_bytes
        resident.loaded_at, resident.load_ms = time.time(), load_ms
        resident.loaded_at_s = resident.last_used = self.clock()
        self.policy.touched(resident)

    def reserve_copy(self, resident: Resident, peak_bytes: int) -> int | None:
        """Room for one more copy of a loaded model (scale-out) while it loads, if that fits
        without evicting: its footprint, or its load's peak (`peak_bytes`: unpickling's buffers)
        where that is more. The bytes reserved, or None."""
        reserved = max(resident.footprint, peak_bytes)
        if self.shortfall_bytes(reserved) > 0:
            return None
        resident.bytes += reserved
        return reserved

    def add_copy(self, resident: Resident, worker_id: int) -> None:
        """One more worker holds the model (its bytes were reserved by `reserve_copy`)."""
        resident.workers.append(worker_id)

    def remove_copy(self, resident: Resident, worker_id: int) -> None:
        """A worker no longer serves the model; its bytes count until `release_copy`."""
        resident.workers.remove(worker_id)

    def release_copy(self, resident: Resident, size_bytes: int | None = None) -> None:
        """Give back a copy's bytes: its footprint (it was unloaded), or `size_bytes` (what a
        copy that failed to load reserved, or what one that loaded reserved past its
        footprint)."""
        size = resident.footprint if size_bytes is None else size_bytes
        resident.bytes -= size
        self.released_bytes += size

    def begin_unload(self, name: str) -> Resident:
        resident = self.residents[name]
        resident.state = State.UNLOADING
        return resident

    def remove(self, name: str) -> Resident | None:
        resident = self.residents.pop(name, None)
        self.released_bytes += resident.bytes if resident else 0
        return resident

    def overflow_victims(self) -> list[Resident]:
        """Idle models to unload when a measured footprint turned out larger than reserved, or
        a reading showed the baseline grown into the headroom."""
        return self._claim(self.victims_for(0) or [])

    def idle_victims(self, idle_s: float) -> list[Resident]:
        """Loaded, unpinned models with no request for `idle_s` seconds, claimed for unloading."""
        cutoff = self.clock() - idle_s
        return self._claim([r for r in self._evictable() if r.last_used <= cutoff])

    @staticmethod
    def _claim(victims: list[Resident]) -> list[Resident]:
        """Mark victims as unloading, so no other reservation picks them."""
        for victim in victims:
            victim.state = State.UNLOADING
        return victims

    def begin_request(self, resident: Resident) -> None:
        if resident.hits:  # the first request after a load was counted by its reserve
            self.record_access(resident.name)
        resident.in_flight += 1
        resident.hits += 1
        resident.last_used = self.clock()
        self.policy.touched(resident)

    def end_request(self, resident: Resident) -> None:
        resident.in_flight -= 1
