"""The frontend's side of the worker pool: fork workers, call them, notice when they die."""

from modelhost.workers.pool.connection import WorkerConnection
from modelhost.workers.pool.lifecycle import RECYCLE_KEPT_BYTES, WorkerPool

__all__ = ["RECYCLE_KEPT_BYTES", "WorkerConnection", "WorkerPool"]
