"""Scheduling: per-model bounded queues, the batcher, placement and scale-out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# With no delay a batch holds only what piled up while the worker was busy: batching costs
# nothing at light load, and under load one prediction serves up to this many requests.
AUTO_BATCH_SIZE = 32


@dataclass(frozen=True)
class SchedulerSettings:
    """The server-wide knobs; a model's manifest may set its own batch size, delay and workers."""

    job_queue_size: int = 100
    max_batch_size: int = 0  # 0: AUTO_BATCH_SIZE for handlers that batch, 1 for the others
    max_batch_delay_ms: float = 0.0
    max_workers_per_model: int = 0  # 0: every worker
    min_workers_per_model: int = 1  # workers_per_model: copies loaded at once, kept through lulls
    max_concurrency: int = 0  # 0: no limit
    response_timeout_s: float = 60.0
    scale_in_idle_s: float = 30.0
    slots_per_worker: int = 1  # batches a worker runs at once: its inference threads

    def batch_size(self, declared: int | None, handler_batches: bool) -> int:
        """A model's batch size: its manifest's, else the server's, else by its handler."""
        if declared or self.max_batch_size:
            return declared or self.max_batch_size
        return AUTO_BATCH_SIZE if handler_batches else 1


class ModelSchedule(NamedTuple):
    """What scheduling is in effect for one model: its range of copies and its batching."""

    min_workers: int
    max_workers: int
    batch_size: int
    max_batch_delay_ms: float
