"""Each tenant's share of the disk budget: past its maximum its own least recently used entries
go first, and an artifact larger than the maximum is refused before its download."""

from __future__ import annotations

import sys
from collections.abc import Collection
from typing import Any, Protocol

from modelhost.cache.disk_index import DiskIndex, Row
from modelhost.cache.quotas import Limits, limits_of
from modelhost.errors import InsufficientDisk
from modelhost.units import format_bytes

REASON = "tenant_disk_max"  # of the delete events


class Reservation(Protocol):
    @property
    def bytes(self) -> int: ...

    @property
    def tenant(self) -> str: ...


class Budget(Protocol):
    """What the quotas use of the disk budget."""

    @property
    def reservations(self) -> Collection[Reservation]: ...

    def in_use(self, name: str) -> bool: ...

    def delete(self, name: str, reason: str) -> None: ...

    def hand_trash_to(self, reservation: Any) -> None: ...  # its own kind of reservation


class DiskQuotas:
    def __init__(self, index: DiskIndex, limits: Limits, budget: Budget) -> None:
        self.index, self.limits, self.budget = index, limits, budget

    def make_room(self, reservation: Reservation, name: str, minimum: int) -> int:
        """Delete the tenant's own entries until `minimum` fits its maximum; return the most
        the reservation may hold."""
        tenant = reservation.tenant
        max_bytes = limits_of(self.limits, tenant).disk_max_bytes
        if not max_bytes:
            return sys.maxsize
        if minimum > max_bytes:
            raise InsufficientDisk(
                f"model {name} of tenant {tenant} needs {format_bytes(minimum)} of disk but the "
                f"tenant's disk_max is {format_bytes(max_bytes)}; raise disk_max for tenant "
                f"{tenant} in the tenants file (--tenants-file) to at least {format_bytes(minimum)}"
            )
        others = self.held_bytes(tenant) - reservation.bytes  # than this reservation
        if others + minimum > max_bytes:
            victims = self._victims(tenant, others + minimum - max_bytes)
            if victims is None:
                raise InsufficientDisk(
                    f"model {name} of tenant {tenant} needs {format_bytes(minimum)} of disk but "
                    f"the tenant holds {format_bytes(others)} of its disk_max of "
                    f"{format_bytes(max_bytes)} in models being fetched or loaded, or whose "
                    "handlers read their files; retry once its loads end, or raise disk_max for "
                    f"tenant {tenant} in the tenants file (--tenants-file)"
                )
            for row in victims:
                self.budget.delete(row.name, reason=REASON)
            self.budget.hand_trash_to(reservation)
            others -= sum(row.bytes for row in victims)
        return max_bytes - others

    def held_bytes(self, tenant: str) -> int:
        """Its entries and its entries being built."""
        building = sum(r.bytes for r in self.budget.reservations if r.tenant == tenant)
        return self.index.tenant_bytes(tenant) + building

    def _victims(self, tenant: str, wanted: int) -> list[Row] | None:
        """Its oldest entries no load needs, until they hold `wanted`; None if they cannot."""
        victims: list[Row] = []
        held = 0
        for row in self.index.oldest_entries_of(tenant):
            if held >= wanted:
                break
            if not self.budget.in_use(row.name):
                victims.append(row)
                held += row.bytes
        return victims if held >= wanted else None
