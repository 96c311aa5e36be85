"""What each tenant may have: the tenants file's policies, a default and exceptions by name.

The file itself is read by `read_tenants_file`; these are the values the server uses.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TenantPolicy:
    """One tenant's share and limits; zero means no limit of its own."""

    weight: float = 1.0  # its share of the workers' time, against the others' weights
    max_concurrency: int = 0  # its requests in flight at once
    rate: float = 0.0  # requests a second, refilled continuously
    burst: int = 0  # requests at once above the rate; 0: max(1, rate)
    memory_min_bytes: int = 0  # of the memory budget: never evicted for another tenant
    memory_max_bytes: int = 0  # of the memory budget: its own models make room past it
    disk_max_bytes: int = 0  # of the disk budget

    @property
    def burst_requests(self) -> int:
        return self.burst or max(1, int(self.rate))


@dataclass(frozen=True)
class TenantPolicies:
    """The default for every tenant the file does not name, and those it names."""

    default: TenantPolicy = TenantPolicy()
    named: dict[str, TenantPolicy] = field(default_factory=dict)

    def of(self, tenant: str) -> TenantPolicy:
        return self.named.get(tenant, self.default)
