"""The memory tier: reservations for loads against the budget, and the records they leave."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory.budget import MemoryBudget
from modelhost.cache.memory.copies import CopyRoom
from modelhost.cache.memory.ledger import Ledger, Resident, State
from modelhost.cache.memory.shares import over_max_bytes
from modelhost.cache.memory.victims import Victims
from modelhost.cache.policy import EvictionPolicy, LRUPolicy
from modelhost.cache.quotas import Limits, TenantLimits, limits_of, no_limits


class MemoryTier:
    """Which models hold how many bytes of memory, and which leave to make room for a load."""

    def __init__(
        self,
        budget: MemoryBudget,
        policy: EvictionPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        *,
        admission: FrequencySketch | None = None,
        min_residency_s: float = 0.0,
        limits: Limits = no_limits,
    ) -> None:
        self.budget, self.clock, self.limits = budget, clock, limits
        self.ledger = Ledger()
        self.victims = Victims(
            self.ledger, policy or LRUPolicy(), clock, admission, min_residency_s, limits=limits
        )
        self.copies = CopyRoom(self.ledger, self.shortfall_bytes, self.over_max_bytes)

    @property
    def residents(self) -> dict[str, Resident]:
        return self.ledger.residents

    def __iter__(self) -> Iterator[Resident]:
        return iter(list(self.residents.values()))

    def get(self, name: str) -> Resident | None:
        return self.residents.get(name)

    @property
    def committed_bytes(self) -> int:
        """The baseline plus every model in memory; a victim counts in its load's reservation."""
        return self.budget.baseline_bytes + self.ledger.held_bytes

    @property
    def leaving_bytes(self) -> int:
        """Held by models unloading for no load; no victim is chosen for them."""
        return self.ledger.leaving_bytes

    @property
    def released_bytes(self) -> int:
        """Ever, so a reading that raced a release is seen."""
        return self.ledger.released_bytes

    @property
    def unreserved_bytes(self) -> int:
        return self.budget.budget_bytes - self.budget.headroom_floor_bytes - self.committed_bytes

    def shortfall_bytes(self, size_bytes: int) -> int:
        """Over the budget less headroom with `size_bytes` more; 0 or less fits."""
        room = self.budget.budget_bytes - self.budget.headroom_bytes
        return self.committed_bytes + size_bytes - room

    def fits_ever(self, size_bytes: int) -> bool:
        return size_bytes <= self.budget.capacity_bytes

    def limits_of(self, tenant: str) -> TenantLimits:
        return limits_of(self.limits, tenant)

    def over_max_bytes(self, tenant: str, size_bytes: int) -> int:
        """How far `size_bytes` more would take `tenant` past its maximum; 0 or less fits."""
        return over_max_bytes(self.ledger, self.limits, tenant, size_bytes)

    def reserve(
        self, name: str, size_bytes: int, pinned: bool = False, tenant: str = ""
    ) -> list[Resident] | None:
        """The victims to unload for a load of `tenant`'s model, or None while too busy.

        Until `victims_gone` the reservation holds the victims' bytes, still in memory: those of
        its own tenant charged to it, the others' to theirs.
        """
        self.victims.record_access(name)
        own = self._own_victims(tenant, size_bytes)
        if own is None:
            return None
        freed_own = sum(victim.bytes for victim in own)
        others = self.load_victims(name, size_bytes - freed_own, tenant, own)
        if others is None:
            return None
        freed = freed_own + sum(victim.bytes for victim in others)
        if size_bytes - freed > self.unreserved_bytes:
            return None  # models leaving will make the room: wait, evict no more
        if self.over_max_bytes(tenant, max(0, size_bytes - freed_own)) > 0:
            return None  # its own models leaving will make its room
        self.ledger.claim(own, room_taken=True, uncharged=True)
        self.ledger.claim(others, room_taken=True)
        charged = max(size_bytes, freed_own)
        self.ledger.add(
            name,
            max(size_bytes, freed),
            pinned,
            self.clock(),
            tenant=tenant,
            carried=max(0, freed - charged),
        )
        return own + others

    def _own_victims(self, tenant: str, size_bytes: int) -> list[Resident] | None:
        """The tenant's own models that must leave for it to stay within its maximum."""
        over = self.over_max_bytes(tenant, size_bytes) - self.ledger.tenant_leaving[tenant]
        if over <= 0:
            return []
        return self.victims.own(tenant, over, settled_only=True)

    def victims_gone(self, resident: Resident, size_bytes: int) -> None:
        """The reservation's victims are gone: it keeps `size_bytes`."""
        if self.ledger.current(resident):  # else removed meanwhile, and its bytes with it
            self.ledger.resize(resident, size_bytes)

    def observe(
        self, real_bytes: int, released_before: int, frontend_bytes: int | None = None
    ) -> None:
        """Fold the measured PSS into the baseline: what the models do not explain.

        Bytes released during the reading are taken off, or churn would raise it for good.
        """
        real_bytes = self.budget.charged_bytes(real_bytes, frontend_bytes)
        raced = self.released_bytes - released_before
        settled = not raced and not self.ledger.unsettled
        self.budget.fold(max(0, real_bytes - raced - self.ledger.all_bytes), settled)

    def victims_for(self, size_bytes: int) -> list[Resident] | None:
        """Ignores minimum residency and admission: being over budget comes first."""
        return self.victims.choose(self._shortfalls(size_bytes), None, settled_only=False)

    def load_victims(
        self, name: str, size_bytes: int, tenant: str = "", spared: list[Resident] | None = None
    ) -> list[Resident] | None:
        """Models past the minimum residency, so two cannot take turns evicting each other."""
        shortfalls = self._shortfalls(size_bytes)
        return self.victims.choose(shortfalls, name, True, tenant, spared or ())

    def _shortfalls(self, size_bytes: int) -> tuple[int, int]:
        """Over the budget less the headroom, else less the floor alone: a load never waits for
        the learned headroom, so readings that move it wake no one."""
        soft = self.shortfall_bytes(size_bytes) - self.leaving_bytes
        return soft, soft - self.budget.learned_headroom_bytes

    def overflow_victims(self) -> list[Resident]:
        """Claimed victims for the bytes committed past the budget."""
        return self.ledger.claim(self.victims_for(0) or [])

    def mark_loaded(self, name: str, worker_id: int, footprint_bytes: int, load_ms: float) -> None:
        resident = self.residents[name]
        self.ledger.loaded(resident, worker_id, footprint_bytes, load_ms, self.clock())
        self.victims.loaded(resident)

    def begin_unload(self, name: str) -> Resident:
        resident = self.residents[name]
        self.ledger.claim([resident])
        return resident

    def remove(self, name: str) -> Resident | None:
        resident = self.ledger.remove(name)
        if resident is not None:
            self.victims.forget(resident)
        return resident

    def begin_request(self, resident: Resident) -> None:
        if resident.hits:  # a load's first request was counted by its reserve
            self.victims.record_access(resident.name)
        self.ledger.begin_request(resident, self.clock())
        self.victims.used(resident)

    def end_request(self, resident: Resident) -> None:
        self.ledger.end_request(resident)

    def served_elsewhere(self, names: list[str]) -> dict[str, Resident]:
        """Requests another process answered, in order, as `begin_request` and `end_request`
        count each; the loaded models among them."""
        loaded = {}
        for name in dict.fromkeys(names):
            resident = self.residents.get(name)
            if resident is not None and resident.state is State.LOADED:
                loaded[name] = resident
        self.victims.record_accesses(_accessed(names, loaded))
        counts = Counter(names)
        for name in reversed(dict.fromkeys(reversed(names))):  # their last uses' order
            if (resident := loaded.get(name)) is not None:
                self.ledger.served(resident, 1, self.clock())
                self.victims.used(resident)  # only a first use may lower a key
                if more := counts[name] - 1:
                    self.ledger.served(resident, more, resident.last_used)
                    self.victims.used(resident)
        return loaded


def _accessed(names: list[str], loaded: dict[str, Resident]) -> list[str]:
    """The uses to record: but a load's first, which its reserve recorded."""
    firsts = {name for name, resident in loaded.items() if not resident.hits}
    accessed = []
    for name in names:
        if name in firsts:
            firsts.discard(name)
        elif name in loaded:
            accessed.append(name)
    return accessed
