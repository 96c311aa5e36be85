"""Which loaded models leave memory: idle, unpinned, not awaited, in the policy's order.

Candidates are walked lazily from the policy's order (or the least recently used, for idle
unloads), so choosing a few weighs only the models walked. Tenants' minimums and maximums:
docs/decisions.md, "Tenants' memory".
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from types import MappingProxyType

from modelhost.cache.admission import FrequencySketch, no_more_frequent
from modelhost.cache.memory.ledger import Ledger, Resident, State
from modelhost.cache.memory.shares import Sparing
from modelhost.cache.order import LazyOrder
from modelhost.cache.policy import Admit, EvictionPolicy
from modelhost.cache.quotas import Limits, limits_of, no_limits

Spare = Callable[[], Admit | None]  # a new test of candidates for each walk
NONE_OWN: Mapping[str, float] = MappingProxyType({})


class Victims:
    """The eviction policy, admission filter and minimum residency over the loaded models."""

    def __init__(
        self,
        ledger: Ledger,
        policy: EvictionPolicy,
        clock: Callable[[], float],
        admission: FrequencySketch | None,
        min_residency_s: float,
        limits: Limits = no_limits,
    ) -> None:
        self.policy, self.admission, self.min_residency_s = policy, admission, min_residency_s
        self._ledger, self._clock, self.limits = ledger, clock, limits
        self.by_policy = LazyOrder(policy.key, self._loaded)
        self._by_use = LazyOrder(lambda r: r.last_used, self._loaded)
        self._by_tenant: dict[str, LazyOrder[Resident]] = {}  # the policy's, per tenant
        self._awaited: Counter[str] = Counter()

    def _loaded(self, resident: Resident) -> bool:
        return resident.state is State.LOADED and self._ledger.current(resident)

    @contextlib.contextmanager
    def awaited(self, name: str) -> Iterator[None]:
        """While callers wait for its load: it serves them before it can be a victim."""
        self._awaited[name] += 1
        try:
            yield
        finally:
            self._awaited[name] -= 1
            if not self._awaited[name]:
                del self._awaited[name]

    def is_awaited(self, name: str) -> bool:
        return name in self._awaited

    def choose(
        self,
        shortfalls: tuple[int, int],
        name: str | None,
        settled_only: bool,
        tenant: str | None = None,
        spared: Collection[Resident] = (),
    ) -> list[Resident] | None:
        """Victims for the first shortfall, else the second; none when one is not positive.

        A load for `name` first spares models used more than it, when admission is on. A load
        of `tenant` never takes another tenant below its minimum; `None`: for no tenant's load,
        when the budget itself is at stake. `spared` are already chosen, and leave.
        """
        for shortfall in shortfalls:
            if shortfall <= 0:
                return []
            for spare in self._sparing(tenant, spared):
                if self.admission is not None and name is not None:
                    rarer, test = no_more_frequent(self.admission, name), spare()
                    admit = rarer if test is None else _both(rarer, test)
                    if (chosen := self._take(shortfall, settled_only, admit, spared)) is not None:
                        return chosen
                if (chosen := self._take(shortfall, settled_only, spare(), spared)) is not None:
                    return chosen
        return None

    def own(self, tenant: str, need_bytes: int, settled_only: bool) -> list[Resident] | None:
        """`tenant`'s own models, in the policy's order, until they free `need_bytes`."""
        order = self._by_tenant.get(tenant)
        if order is None:
            return None
        return self._take(need_bytes, settled_only, order=order)

    def _sparing(self, tenant: str | None, spared: Collection[Resident]) -> list[Spare]:
        """The tests of each pass: every tenant's minimum kept, then the loading tenant's own
        models given freely (or, for no tenant's load, anything)."""
        if self.limits is no_limits:
            return [lambda: None]
        ledger, limits = self._ledger, self.limits

        def keeping(own: str | None) -> Spare:
            return lambda: Sparing(ledger, limits, own, spared)

        if tenant is None:
            return [keeping(None), lambda: None]
        if not limits_of(limits, tenant).memory_min_bytes:
            return [keeping(None)]
        return [keeping(None), keeping(tenant)]

    def idle(self, idle_s: float, own_s: Mapping[str, float] = NONE_OWN) -> list[Resident]:
        """Claimed: the models unused past their own time in `own_s`, else past `idle_s` (0:
        never)."""
        now, residents = self._clock(), self._ledger.residents
        due = [
            r for n, s in own_s.items() if (r := residents.get(n)) and 0 < s <= now - r.last_used
        ]
        if idle_s:
            walk = self._by_use.walk()
            try:
                idle = itertools.takewhile(lambda r: r.last_used <= now - idle_s, walk)
                due += [r for r in idle if r.name not in own_s]
            finally:
                walk.close()
        return self._ledger.claim([r for r in due if self._candidate(r)])

    def longest_idle_s(self) -> float:
        """The longest any loaded model has gone unused."""
        idlest = self._by_use.first()
        return self._clock() - idlest.last_used if idlest else 0.0

    def record_access(self, name: str) -> None:
        if self.admission is not None:
            self.admission.record(name)

    def record_accesses(self, names: list[str]) -> None:
        if self.admission is not None:
            self.admission.record_all(names)

    def loaded(self, resident: Resident) -> None:
        self.policy.touched(resident)
        self.by_policy.add(resident)
        self._by_use.add(resident)
        if resident.tenant and self.limits is not no_limits:  # walked only for a limit
            order = self._by_tenant.get(resident.tenant)
            if order is None:
                order = self._by_tenant[resident.tenant] = LazyOrder(self.policy.key, self._loaded)
            order.add(resident)

    def used(self, resident: Resident) -> None:
        self.policy.touched(resident)
        self.by_policy.touched(resident)
        if self._by_tenant and (order := self._by_tenant.get(resident.tenant)) is not None:
            order.touched(resident)

    def forget(self, resident: Resident) -> None:
        self.by_policy.forget(resident.name)
        self._by_use.forget(resident.name)
        order = self._by_tenant.get(resident.tenant)
        if order is not None:
            order.forget(resident.name)
            if not order:
                del self._by_tenant[resident.tenant]

    def _take(
        self,
        need_bytes: int,
        settled_only: bool,
        admit: Admit | None = None,
        spared: Collection[Resident] = (),
        order: LazyOrder[Resident] | None = None,
    ) -> list[Resident] | None:
        now = self._clock()
        walk = (order or self.by_policy).walk()
        try:
            candidates = (
                r
                for r in walk
                if self._candidate(r)
                and (not settled_only or self._settled(r, now))
                and r not in spared
            )
            return self.policy.take(candidates, need_bytes, admit)
        finally:
            walk.close()  # what it walked goes back, in its place

    def _candidate(self, resident: Resident) -> bool:
        return resident.evictable and not self._awaited[resident.name]

    def _settled(self, resident: Resident, now: float) -> bool:
        loaded_at_s = resident.loaded_at_s
        return loaded_at_s is not None and now - loaded_at_s >= self.min_residency_s


def _both(first: Admit, second: Admit) -> Admit:
    """The second test is asked only of candidates the first lets go: it counts what it admits."""
    return lambda candidate: first(candidate) and second(candidate)
