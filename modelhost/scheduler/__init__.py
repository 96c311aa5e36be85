"""Scheduling: per-model bounded queues, the batcher, placement and scale-out."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

AUTO_BATCH_SIZE = 32  # with no delay, only what piled up while the worker was busy
FAIR_REQUESTS_PER_THREAD = 16  # in flight with tenants on and no max_concurrency (decisions.md)


class TenantLimits(Protocol):
    """What the scheduler reads of a tenant's policy (config.tenant_policies.TenantPolicy)."""

    @property
    def weight(self) -> float: ...
    @property
    def max_concurrency(self) -> int: ...
    @property
    def rate(self) -> float: ...
    @property
    def burst_requests(self) -> int: ...


class TenantPolicyView(Protocol):
    """Each tenant's limits (config.tenant_policies.TenantPolicies)."""

    def of(self, tenant: str) -> TenantLimits: ...


@dataclass(frozen=True)
class SchedulerSettings:
    """A manifest may override these per model."""

    job_queue_size: int = 100
    max_batch_size: int = 0  # 0: AUTO_BATCH_SIZE for handlers that batch, else 1
    device_batch_size: int = 0  # for models that can use a device; 0: as max_batch_size
    max_batch_delay_ms: float = 0.0
    max_workers_per_model: int = 0  # 0: every worker
    min_workers_per_model: int = 1  # copies kept through lulls
    max_concurrency: int = 0  # 0: no limit
    response_timeout_s: float = 60.0
    scale_in_idle_s: float = 30.0
    slots_per_worker: int = 1  # a worker's inference threads
    fair_tenants: bool = False  # requests past max_concurrency wait in their tenant's queue
    tenant_policies: Callable[[], TenantPolicyView] | None = None  # the tenants file's, if any
    bodies_room_bytes: int | None = None  # bodies tenants may hold (held_bodies.py); None: any

    def batch_size(
        self, declared: int | None, handler_batches: bool, on_device: bool = False
    ) -> int:
        """The manifest's, else the device's for a model that can use one, else the server's."""
        if on_device and self.device_batch_size and not declared:
            return self.device_batch_size
        if declared or self.max_batch_size:
            return declared or self.max_batch_size
        return AUTO_BATCH_SIZE if handler_batches else 1

    @property
    def tenant_weight(self) -> Callable[[str], float] | None:
        """A tenant's weight, as the tenants file is now; None: all 1."""
        policies = self.tenant_policies
        return None if policies is None else lambda tenant: policies().of(tenant).weight

    def fair_limit(self, workers: int) -> int:
        """The requests in flight before the rest wait in their tenants' queues."""
        return self.max_concurrency or max(
            1, FAIR_REQUESTS_PER_THREAD * workers * self.slots_per_worker
        )


class ModelSchedule(NamedTuple):
    min_workers: int
    max_workers: int
    batch_size: int
    max_batch_delay_ms: float
