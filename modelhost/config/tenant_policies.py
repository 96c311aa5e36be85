"""What each tenant may have: the tenants file's policies, a default and exceptions by name.

The file itself is read by `read_tenants_file`; these are the values the server uses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

TRUSTED, UNTRUSTED = "trusted", "untrusted"


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
    trust: str = TRUSTED  # UNTRUSTED: its models load only in sandboxed workers

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


@dataclass(frozen=True)
class Trust:
    """Why a model is untrusted, "" when it is not: every model under --refuse-pickle, else
    those of tenants the tenants file gives trust = "untrusted". A model's tenant is read from
    its name (--tenant-from name:N), which no request chooses."""

    refuse_pickle: bool = False
    tenant_of: Callable[[str], str] | None = None  # a model's tenant, by its name
    policies: Callable[[], TenantPolicies] = TenantPolicies

    def why_untrusted(self, name: str) -> str:
        if self.refuse_pickle:
            return "--refuse-pickle"
        if self.tenant_of is None:
            return ""
        tenant = self.tenant_of(name)
        if self.policies().of(tenant).trust != UNTRUSTED:
            return ""
        return f'tenant {tenant} has trust = "untrusted" in the tenants file'
