"""What one tenant may hold in the memory and disk tiers, as the tiers read it.

The tenants file's policies have these fields; the composition root hands the tiers a function
from tenant to limits, read at each decision, so a reloaded file applies to the next one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class TenantLimits(Protocol):
    """Zero means no limit of its own."""

    @property
    def weight(self) -> float: ...  # its share of downloads and unpacks

    @property
    def memory_min_bytes(self) -> int: ...  # never evicted for another tenant's load

    @property
    def memory_max_bytes(self) -> int: ...  # past it, its own models make room

    @property
    def disk_max_bytes(self) -> int: ...  # past it, its own entries make room


@dataclass(frozen=True)
class NoLimits:
    weight: float = 1.0
    memory_min_bytes: int = 0
    memory_max_bytes: int = 0
    disk_max_bytes: int = 0


NO_LIMITS = NoLimits()
Limits = Callable[[str], TenantLimits]


def no_limits(tenant: str) -> TenantLimits:
    """Every tenant's limits while no tenants file gives any: today's behaviour."""
    return NO_LIMITS


def limits_of(limits: Limits, tenant: str) -> TenantLimits:
    """The server's own models (tenant "", and every model while tenants are off) have none."""
    return limits(tenant) if tenant else NO_LIMITS


def weights_of(limits: Limits) -> Callable[[str], float]:
    """Weights read at each use."""
    return lambda tenant: limits_of(limits, tenant).weight
