"""Which loaded models leave memory: idle, unpinned, not awaited, in the policy's order.

Candidates are walked lazily from the policy's order (and from the least recently used, for idle
unloads), so choosing a few victims weighs only the models walked.
"""

from __future__ import annotations

import contextlib
import itertools
from collections import Counter
from collections.abc import Callable, Iterator

from modelhost.cache.admission import FrequencySketch, no_more_frequent
from modelhost.cache.memory.ledger import Ledger, Resident, State
from modelhost.cache.order import LazyOrder
from modelhost.cache.policy import Admit, EvictionPolicy


class Victims:
    """The eviction policy, admission filter and minimum residency over the loaded models."""

    def __init__(
        self,
        ledger: Ledger,
        policy: EvictionPolicy,
        clock: Callable[[], float],
        admission: FrequencySketch | None,
        min_residency_s: float,
    ) -> None:
        self.policy, self.admission, self.min_residency_s = policy, admission, min_residency_s
        self._ledger, self._clock = ledger, clock
        self.by_policy = LazyOrder(policy.key, self._loaded)
        self._by_use = LazyOrder(lambda r: r.last_used, self._loaded)
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

    def choose(
        self, shortfalls: tuple[int, int], name: str | None, settled_only: bool
    ) -> list[Resident] | None:
        """Victims for the first shortfall, else the second; none when one is not positive.

        A load for `name` first spares models used more than it, when admission is on.
        """
        for shortfall in shortfalls:
            if shortfall <= 0:
                return []
            if self.admission is not None and name is not None:
                rarer = no_more_frequent(self.admission, name)
                if (chosen := self._take(shortfall, settled_only, rarer)) is not None:
                    return chosen
            if (chosen := self._take(shortfall, settled_only)) is not None:
                return chosen
        return None

    def idle(self, idle_s: float) -> list[Resident]:
        """Claimed, walked from the least recently used to the first used since the cutoff."""
        cutoff = self._clock() - idle_s
        walk = self._by_use.walk()
        try:
            idle = itertools.takewhile(lambda r: r.last_used <= cutoff, walk)
            return self._ledger.claim([r for r in idle if self._candidate(r)])
        finally:
            walk.close()

    def longest_idle_s(self) -> float:
        """The longest any loaded model has gone unused."""
        idlest = self._by_use.first()
        return self._clock() - idlest.last_used if idlest else 0.0

    def record_access(self, name: str) -> None:
        if self.admission is not None:
            self.admission.record(name)

    def loaded(self, resident: Resident) -> None:
        self.policy.touched(resident)
        self.by_policy.add(resident)
        self._by_use.add(resident)

    def used(self, resident: Resident) -> None:
        self.policy.touched(resident)
        self.by_policy.touched(resident)

    def forget(self, name: str) -> None:
        self.by_policy.forget(name)
        self._by_use.forget(name)

    def _take(
        self, need_bytes: int, settled_only: bool, admit: Admit | None = None
    ) -> list[Resident] | None:
        now = self._clock()
        walk = self.by_policy.walk()
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
        return resident.evictable and not self._awaited[resident.name]

    def _settled(self, resident: Resident, now: float) -> bool:
        loaded_at_s = resident.loaded_at_s
        return loaded_at_s is not None and now - loaded_at_s >= self.min_residency_s
