"""The frontend's handle on one worker process, and the calls it still owes replies to."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from modelhost.deadlines import Deadlines
from modelhost.errors import WorkerDied
from modelhost.workers.messages import Reply

Waiter = asyncio.Future[tuple[Reply, bytes]]
CallKey = tuple["WorkerHandle", int]  # a call in flight: its worker and request id


@dataclass(eq=False)
class WorkerHandle:
    """The server's side of one worker process: its socket, and the replies it still owes."""

    worker_id: int
    pid: int
    transport: asyncio.WriteTransport
    started_at: float
    # request id → (reply, model, the deadlines it is in)
    pending: dict[int, tuple[Waiter, str, Deadlines[CallKey]]] = field(default_factory=dict)
    alive: bool = True
    kept_bytes: int = 0  # memory it kept with no model left, once past RECYCLE_KEPT_BYTES

    def fail_pending(self, reason: str) -> None:
        for request_id, (future, model, deadlines) in self.pending.items():
            deadlines.discard((self, request_id))
            if not future.done():
                future.set_exception(
                    WorkerDied(
                        f"worker {self.worker_id} (pid {self.pid}) {reason} while serving model "
                        f"{model}; it is being replaced and a retry is safe"
                    )
                )
        self.pending.clear()
