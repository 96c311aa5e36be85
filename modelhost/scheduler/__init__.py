"""Scheduling: per-model bounded queues, the batcher, placement and scale-out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SchedulerSettings:
    """The server-wide knobs; a model's manifest may set its own batch size, delay and workers."""

    job_queue_size: int = 100
    max_batch_size: int = 1
    max_batch_delay_ms: float = 0.0
    max_workers_per_model: int = 0  # 0: every worker
    max_concurrency: int = 0  # 0: no limit
    response_timeout_s: float = 60.0
    scale_in_idle_s: float = 30.0
    slots_per_worker: int = 1  # batches a worker runs at once: its inference threads
