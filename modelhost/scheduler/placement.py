"""Placement: which worker a model is loaded into."""

from __future__ import annotations

from collections.abc import Iterable

from modelhost.cache.memory import MemoryTier
from modelhost.errors import Unavailable
from modelhost.workers.handle import WorkerHandle


def least_loaded(workers: Iterable[WorkerHandle], memory: MemoryTier) -> WorkerHandle:
    """Fewest bytes held, then fewest calls in flight."""
    held = memory.copies.held_by_worker()
    live = [worker for worker in workers if worker.alive]
    if not live:
        raise Unavailable("no worker is running (they are restarting); retry in a moment")
    return min(live, key=lambda w: (held.get(w.worker_id, 0), len(w.pending), w.worker_id))
