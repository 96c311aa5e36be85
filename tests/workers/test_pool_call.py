"""The pool's side of a call when the worker's connection closed before its reader saw the end:
the caller gets WorkerDied at once (a retry is safe), never a request left waiting forever."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest
import uvloop

from modelhost.errors import WorkerDied
from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Unload, Unloaded
from modelhost.workers.pool import WorkerPool


def test_closed_connection_call_fails(tmp_path: Path) -> None:
    """A call on a closed connection fails with WorkerDied."""

    async def scenario() -> None:
        ours, theirs = socket.socketpair()
        _, writer = await asyncio.open_unix_connection(sock=ours)
        worker = WorkerHandle(1, 0, writer.transport, 0.0)
        writer.close()  # as when the worker dies: the transport closes before _lost runs
        pool = WorkerPool(1, 1, tmp_path, EventLog())
        with pytest.raises(WorkerDied, match="retry is safe"):
            await asyncio.wait_for(pool.call(worker, Unload("m"), Unloaded, model="m"), 5)
        assert not worker.pending
        theirs.close()

    uvloop.run(scenario())  # the server's loop: its closed transports raise on write
