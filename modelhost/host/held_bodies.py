"""Request bodies held while their requests wait and run (docs/tenants.md, "Request bodies")."""

from __future__ import annotations

from modelhost.errors import TenantQueueFull
from modelhost.units import format_bytes


class HeldBodies:
    """Bodies' bytes by tenant; past `room_bytes` in all, the tenant holding the most is refused."""

    def __init__(self, room_bytes: int) -> None:
        self.room_bytes = room_bytes
        self.total = 0
        self.by_tenant: dict[str, int] = {}

    def hold(self, tenant: str, size: int) -> None:
        total = self.total + size
        if total > self.room_bytes:
            self._check(tenant)
        self.total = total
        by_tenant = self.by_tenant
        by_tenant[tenant] = by_tenant.get(tenant, 0) + size

    def release(self, tenant: str, size: int) -> None:
        self.total -= size
        held = self.by_tenant.pop(tenant) - size
        if held:
            self.by_tenant[tenant] = held

    def _check(self, tenant: str) -> None:
        held = self.by_tenant.get(tenant, 0)
        if held and held >= self._most_of_others(tenant):  # one body each always passes
            raise TenantQueueFull(
                f"tenant {tenant or '(default)'} holds {format_bytes(held)} of request bodies "
                f"waiting or running, the most of any tenant, and the server's room for them "
                f"({format_bytes(self.room_bytes)}, --frontend-memory-allowance) is full: past it "
                "they would take the models' memory; retry when some are answered, or raise "
                "--frontend-memory-allowance"
            )

    def _most_of_others(self, tenant: str) -> int:
        return max((n for other, n in self.by_tenant.items() if other != tenant), default=0)
