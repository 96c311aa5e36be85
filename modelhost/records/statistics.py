"""The host's statistics: plain records of what it holds, for `observe/` and `http/` to render.

The core fills these and nothing else; the JSON of `/stats` and `GET /models/{model}`, the
Prometheus families and the OIP repository's states are built from them by their presenters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from modelhost.records.events import Event


@dataclass
class BatchingStatistics:
    """Batches sent to workers and the requests they carried, since start."""

    batches: int = 0
    requests: int = 0
    largest: int = 0
    retried: int = 0  # requests tried once more because a worker died

    def count(self, size: int) -> None:
        self.batches += 1
        self.requests += size
        self.largest = max(self.largest, size)


@dataclass(frozen=True)
class MemoryStatistics:
    """The memory tier against its budget, as the host accounts it and as the OS measures it."""

    budget_bytes: int
    baseline_bytes: int  # the idle server's PSS, drift included
    committed_bytes: int  # baseline plus the footprints of loading and loaded models
    headroom_bytes: int  # kept free for growth between readings (see `MemoryTier.headroom_bytes`)
    pss_bytes: int  # the whole server as the OS measured it at the last reading (< 1 s ago)
    models: dict[str, int]  # state → how many models are in it
    footprints: dict[str, int]  # loaded model → its footprint
    frontend_bytes: int = 0  # the frontend's share of `pss_bytes`
    frontend_allowance_bytes: int = 0  # what it may use, said at start (0: not accounted apart)


class CurvePoint(NamedTuple):
    room_bytes: int  # for models: the budget less `SizingStatistics.fixed_bytes`
    hit_ratio: float  # LRU's, with that room


class HotModel(NamedTuple):
    name: str
    share: float  # of the requests lately
    requests: int  # since it became one of the most requested


@dataclass(frozen=True)
class SizingStatistics:
    """What the live miss-ratio curve says about the budget (`host/sizing.py`)."""

    window: str  # hour | day: the decay of the requests it weighs
    policy: str  # the server's eviction policy; the curve is LRU's
    budget_bytes: int
    room_bytes: int  # what the budget leaves for models today
    observed_hit_ratio: float | None  # of the last hour's requests; None before any
    predicted_hit_ratio: float | None  # the curve's at `room_bytes`; None without a curve
    budget_needed: dict[float, float]  # hit ratio → memory budget; inf: none reaches it
    hit_ratio_at_factor: dict[float, float]  # multiple of `room_bytes` → hit ratio
    instances_needed: dict[float, float]  # hit ratio → room it needs / room of one instance
    curve: tuple[CurvePoint, ...]
    sampled_names: int
    sample_rate: float  # the share of names the curve tracks
    thrashing: bool
    early_returns: int  # evicted models that came back within the cache's age, ever
    cache_age_s: float | None  # how long recent victims had gone unused
    requests: int = 0  # served by a model, ever
    hot_models: tuple[HotModel, ...] = ()  # the most requested

    @property
    def fixed_bytes(self) -> int:
        return self.budget_bytes - self.room_bytes


@dataclass(frozen=True)
class DiskStatistics:
    """The disk tier against its budget."""

    budget_bytes: int
    used_bytes: int
    artifacts: int = 0  # rows in its index: cache entries and files read in place


@dataclass(frozen=True)
class WorkerStatistics:
    """One live worker process and the calls it has under way."""

    worker_id: int
    pid: int
    in_flight: int  # calls (infer, load, unload) sent and not yet answered


@dataclass(frozen=True)
class HostStatistics:
    """Everything the host reports at once: memory, disk, workers and batching."""

    memory: MemoryStatistics
    disk: DiskStatistics
    workers: tuple[WorkerStatistics, ...]
    batching: BatchingStatistics
    sizing: SizingStatistics | None = field(default=None)


@dataclass(frozen=True)
class ModelStatistics:
    """One model as the host knows it, loaded or not."""

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
    loaded_at: float | None  # epoch seconds
    load_ms: float | None
    # what its next load reserves while it runs: its footprint, or more if unpickling needed more
    load_reserve_bytes: int | None
    events: tuple[Event, ...]
