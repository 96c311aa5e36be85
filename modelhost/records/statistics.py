"""The host's statistics: plain records that `observe/` and `http/` render."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from modelhost.records.events import Event


@dataclass
class BatchingStatistics:
    """Since start."""

    batches: int = 0
    requests: int = 0
    largest: int = 0
    retried: int = 0  # after a worker died

    def count(self, size: int) -> None:
        self.batches += 1
        self.requests += size
        self.largest = max(self.largest, size)


@dataclass(frozen=True, kw_only=True)
class MemoryStatistics:
    budget_bytes: int
    baseline_bytes: int  # the idle server's
    committed_bytes: int
    headroom_bytes: int
    pss_bytes: int  # at the last reading
    models: dict[str, int]  # by state
    footprints: dict[str, int]
    frontend_bytes: int = 0
    frontend_allowance_bytes: int = 0  # 0: not accounted apart


class CurvePoint(NamedTuple):
    room_bytes: int  # the budget less `SizingStatistics.fixed_bytes`
    hit_ratio: float


class HotModel(NamedTuple):
    name: str
    share: float  # of recent requests
    requests: int  # since it became hot
    instance_requests: int = 0  # all of the instance's since then


@dataclass(frozen=True)
class SizingStatistics:
    """What the live miss-ratio curve says (`host/sizing.py`)."""

    window: str  # hour | day
    policy: str  # the server's, while the curve is LRU's
    budget_bytes: int
    room_bytes: int  # for models
    observed_hit_ratio: float | None  # of the last hour
    predicted_hit_ratio: float | None
    budget_needed: dict[float, float]  # by hit ratio; inf: unreachable
    hit_ratio_at_factor: dict[float, float]  # by multiple of `room_bytes`
    instances_needed: dict[float, float]  # by hit ratio
    curve: tuple[CurvePoint, ...]
    sampled_names: int
    sample_rate: float
    thrashing: bool
    early_returns: int  # victims back within the cache's age
    cache_age_s: float | None  # how long recent victims went unused
    requests: int = 0
    hot_models: tuple[HotModel, ...] = ()

    @property
    def fixed_bytes(self) -> int:
        return self.budget_bytes - self.room_bytes


@dataclass(frozen=True)
class DiskStatistics:
    budget_bytes: int
    used_bytes: int
    artifacts: int = 0  # entries and files read in place


@dataclass(frozen=True)
class DeviceStatistics:
    """One device: its budget, what is charged to it, and its models' moves."""

    name: str
    budget_bytes: int
    used_bytes: int  # models and contexts
    context_bytes: int  # the workers' contexts, each charged once
    models: int  # on the device now
    asleep: int  # moved off it, waiting in host memory (all devices')
    wakes: int
    evictions: int  # models sent to sleep in host memory


@dataclass(frozen=True)
class WorkerStatistics:
    worker_id: int
    pid: int
    in_flight: int  # calls of any kind


@dataclass(frozen=True)
class TenantHoldings:
    """Bytes each tenant holds in memory and on disk ("" is the server's own), and the seconds
    left of each held-back tenant's hold."""

    memory_bytes: dict[str, int] = field(default_factory=dict)
    disk_bytes: dict[str, int] = field(default_factory=dict)
    held_back_s: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class HostStatistics:
    memory: MemoryStatistics
    disk: DiskStatistics
    workers: tuple[WorkerStatistics, ...]
    batching: BatchingStatistics
    sizing: SizingStatistics | None = field(default=None)
    devices: tuple[DeviceStatistics, ...] = ()


@dataclass(frozen=True)
class ModelStatistics:
    name: str
    url: str
    state: str  # loading | loaded | unloading | on_disk | remote
    memory_bytes: int
    disk_bytes: int
    workers: tuple[WorkerStatistics, ...]
    queued: int
    pinned: bool
    hits: int
    in_flight: int
    last_used: float | None  # epoch seconds
    loaded_at: float | None
    load_ms: float | None
    load_reserve_bytes: int | None  # its footprint, or its last load's peak
    events: tuple[Event, ...]
    load_progress: Event | None = None  # the latest progress event of a load under way
    loaded_at_startup: bool = False  # until unregistered (TorchServe's loadedAtStartup)
