"""The pool's side of a call when the worker's connection closed before its reader saw the end:
the caller gets WorkerDied at once (a retry is safe), never a request left waiting forever."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from unittest.mock import ANY

import pytest
import uvloop

from modelhost.errors import DeadlineExceeded, WorkerDied
from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Answered, Infer, Unload, Unloaded, encode
from modelhost.workers.pool import WorkerPool
from modelhost.workers.pool.calls import Calls
from modelhost.workers.wire import Frame


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


@pytest.mark.parametrize(("answered_later", "stuck"), [(True, "hung"), (False, "")])
def test_a_call_past_its_deadline_names_its_model_if_the_worker_answered_a_later_one(
    answered_later: bool, stuck: str
) -> None:
    """A worker that answers a later call is not stuck under the GIL: the missed call's batch
    is what hangs. One that answers nothing may be held by any of its batches."""

    async def scenario() -> list[tuple[WorkerHandle, str]]:
        ours, theirs = socket.socketpair()
        _, writer = await asyncio.open_unix_connection(sock=ours)
        worker = WorkerHandle(1, 0, writer.transport, 0.0)
        missed: list[tuple[WorkerHandle, str]] = []
        calls = Calls(5.0, 0.2, lambda *args: missed.append(args))
        hung = calls.send(worker, Infer("hung", ()), model="hung")
        later = calls.send(worker, Infer("other", ()), model="other")
        if answered_later:
            calls.answer(worker, Frame(max(worker.pending), encode(Answered((), 1.0))))
            await later
        with pytest.raises(DeadlineExceeded):
            await hung
        writer.close()
        theirs.close()
        return missed

    assert uvloop.run(scenario())[:1] == [(ANY, stuck)]
