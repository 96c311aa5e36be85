"""The pool replaces a worker that says it keeps memory past its limit, once its calls end."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from pathlib import Path

import pytest
import uvloop

from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import UNASKED, Answered, Grown, Infer, encode
from modelhost.workers.pool import WorkerPool, lifecycle
from modelhost.workers.pool.lifecycle import pidfd
from modelhost.workers.running import BATCH, Record
from modelhost.workers.wire import Frame

GROWN = Grown(300 << 20, 256 << 20, "leaks", 290 << 20)


def grown_while_busy(tmp_path: Path, answered: bool) -> tuple[bool, bool, WorkerHandle]:
    """A batch in flight as the worker says it grew; whether the pool closed the worker at
    once, and after the batch's answer (if `answered`) or the grace."""
    process = subprocess.Popen(["sleep", "60"])

    async def scenario() -> tuple[bool, bool, WorkerHandle]:
        ours, theirs = socket.socketpair()
        _, writer = await asyncio.open_unix_connection(sock=ours)
        worker = WorkerHandle(1, process.pid, writer.transport, 0.0, pidfd=pidfd(process.pid))
        pool = WorkerPool(1, 1, tmp_path, EventLog())
        batch = pool.send(worker, Infer("leaks", ()), model="leaks")
        pool.replied(worker, Frame(UNASKED, encode(GROWN), b""))
        at_once = writer.transport.is_closing()
        if answered:
            pool.replied(worker, Frame(max(worker.pending), encode(Answered((), 1.0)), b""))
            await batch
        await asyncio.sleep(0.05)
        later = writer.transport.is_closing()
        writer.close()
        await pool.shutdown()
        theirs.close()
        return at_once, later, worker

    try:
        return uvloop.run(scenario())
    finally:
        process.kill()
        process.wait()


def test_a_grown_worker_answers_its_batch_then_goes(tmp_path: Path) -> None:
    at_once, later, worker = grown_while_busy(tmp_path, answered=True)
    assert (at_once, later) == (False, True)
    assert worker.died_running == Record(frozenset({"leaks"}), crashed=(BATCH, "leaks"))


def test_a_grown_worker_still_busy_goes_after_the_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lifecycle, "GROWN_GRACE_S", 0.01)
    at_once, later, _ = grown_while_busy(tmp_path, answered=False)
    assert (at_once, later) == (False, True)
