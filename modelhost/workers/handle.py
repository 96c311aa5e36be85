"""The frontend's handle on one worker process."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import NamedTuple

from modelhost.deadlines import Deadlines
from modelhost.errors import WorkerDied
from modelhost.workers.messages import DeviceInfo, Grown, Reply
from modelhost.workers.running import Record

Waiter = asyncio.Future[tuple[Reply, bytes]]
CallKey = tuple["WorkerHandle", int]  # worker, request id


class ScratchUse(NamedTuple):
    """A sandboxed worker's scratch folder."""

    bytes: int  # allocated: a sparse file counts what it holds
    entries: int


@dataclass(eq=False)
class WorkerHandle:
    worker_id: int
    pid: int
    transport: asyncio.WriteTransport
    started_at: float
    # request id → (reply, model, its deadlines, the reply's kind, its frame's cap)
    pending: dict[int, tuple[Waiter, str, Deadlines[CallKey], type[Reply], int]] = field(
        default_factory=dict
    )
    alive: bool = True
    kept_bytes: int = 0  # held with no model left, once past RECYCLE_KEPT_BYTES
    untrusted: bool = False  # hosts untrusted models only: sandboxed, or refusing programs
    devices: tuple[DeviceInfo, ...] = ()  # those it can put models on
    tenant: str | None = None  # untrusted: the one tenant whose models it hosts, once it has one
    retiring: bool = False  # replaced for another tenant's models, once its own have left
    pidfd: int = -1  # kills reach this process, never a later one given its pid
    died_running: Record = Record(frozenset())  # as it died
    answered_up_to: int = 0
    killed_for_hanging: str = ""
    grown: Grown | None = None  # said it keeps memory past its limit
    scratch: ScratchUse | None = None  # its scratch folder's, past the limits

    @property
    def replaced_on_purpose(self) -> bool:
        """Killed for what it kept or held, or retired: no crash."""
        return bool(self.kept_bytes or self.retiring or self.grown or self.scratch)

    def fail_pending(self, reason: str) -> None:
        for request_id, (future, model, deadlines, *_) in self.pending.items():
            deadlines.discard((self, request_id))
            if not future.done():
                future.set_exception(
                    WorkerDied(
                        f"worker {self.worker_id} (pid {self.pid}) {reason} while serving model "
                        f"{model}; it is being replaced and a retry is safe"
                    )
                )
        self.pending.clear()
