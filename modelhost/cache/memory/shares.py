"""Tenants' shares of memory: a guaranteed minimum no other tenant's load evicts, a maximum
past which a tenant's own models make room.

A walk of victims asks `Sparing` of each candidate in the policy's order, so tenants above their
minimum give first and, within that, the policy's order holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from modelhost.cache.memory.ledger import Ledger, Resident
from modelhost.cache.quotas import Limits, limits_of


class Sparing:
    """Lets a candidate go while its tenant keeps its minimum, or freely if `own` is its tenant.

    One per walk: it counts what the walk has taken from each tenant.
    """

    def __init__(
        self, ledger: Ledger, limits: Limits, own: str | None, taken: Iterable[Resident] = ()
    ) -> None:
        self._ledger, self._limits, self._own = ledger, limits, own
        self._taken: Counter[str] = Counter()
        for resident in taken:
            self._taken[resident.tenant] += resident.bytes

    def __call__(self, candidate: object) -> bool:
        assert isinstance(candidate, Resident)
        tenant = candidate.tenant
        if tenant != self._own and self.left_bytes(tenant) - candidate.bytes < self.min_of(tenant):
            return False
        self._taken[tenant] += candidate.bytes
        return True

    def min_of(self, tenant: str) -> int:
        return limits_of(self._limits, tenant).memory_min_bytes

    def left_bytes(self, tenant: str) -> int:
        """What `tenant` keeps once this walk's victims are gone."""
        return self._ledger.staying_bytes(tenant) - self._taken[tenant]


def over_max_bytes(ledger: Ledger, limits: Limits, tenant: str, size_bytes: int) -> int:
    """How far `size_bytes` more would take `tenant` past its maximum; 0 or less is within."""
    max_bytes = limits_of(limits, tenant).memory_max_bytes
    if not max_bytes:
        return 0
    return ledger.tenant_bytes[tenant] + size_bytes - max_bytes
