"""The pool replaces an idle worker whose unload says it keeps memory its models do not explain."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from pathlib import Path

import uvloop

from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import Infer, Load, Loaded, Unload, Unloaded, encode
from modelhost.workers.pool import RECYCLE_KEPT_BYTES, WorkerPool
from modelhost.workers.pool.lifecycle import pidfd
from modelhost.workers.wire import Frame


def unload_then_closing(
    tmp_path: Path, kept_bytes: int, busy: bool = False, loads_again: bool = False
) -> bool:
    """Answer an unload with `kept_bytes` kept (another call still in flight if `busy`; a load
    sent meanwhile, and answered, if `loads_again`); whether the pool then closes the worker's
    connection and kills its process."""
    process = subprocess.Popen(["sleep", "60"])  # the worker's process

    async def scenario() -> bool:
        ours, theirs = socket.socketpair()
        _, writer = await asyncio.open_unix_connection(sock=ours)
        worker = WorkerHandle(1, process.pid, writer.transport, 0.0, pidfd=pidfd(process.pid))
        pool = WorkerPool(1, 1, tmp_path, EventLog())
        unloading = pool.send(worker, Unload("m"), model="m")
        if busy:
            pool.send(worker, Infer("other", ()), model="other")
        loading = (
            pool.send(worker, Load(model="next", path="next.joblib"), model="next")
            if loads_again
            else None
        )
        unload_id, load_id = sorted(worker.pending)[0], max(worker.pending)
        pool.replied(worker, Frame(unload_id, encode(Unloaded(0, kept_bytes)), b""))
        reply, _ = await unloading
        assert reply == Unloaded(0, kept_bytes)
        if loading is not None:
            pool.replied(
                worker, Frame(load_id, encode(Loaded(footprint=1, load_ms=1.0, batches=False)), b"")
            )
            await loading
        await asyncio.sleep(0)  # the recycling follows the reply
        closing = writer.transport.is_closing()
        writer.close()
        await pool.shutdown()
        theirs.close()
        return closing

    try:
        closing = uvloop.run(scenario())
        killed = process.poll() is not None or process_ends(process)
        assert closing == killed
        return closing
    finally:
        process.kill()
        process.wait()


def process_ends(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_an_idle_worker_keeping_memory_is_recycled(tmp_path: Path) -> None:
    assert unload_then_closing(tmp_path, RECYCLE_KEPT_BYTES)


def test_a_worker_keeping_little_is_kept(tmp_path: Path) -> None:
    assert not unload_then_closing(tmp_path, RECYCLE_KEPT_BYTES - 1)


def test_a_busy_worker_is_recycled_only_once_idle(tmp_path: Path) -> None:
    assert not unload_then_closing(tmp_path, RECYCLE_KEPT_BYTES, busy=True)


def test_a_worker_that_takes_a_model_again_is_kept(tmp_path: Path) -> None:
    assert not unload_then_closing(tmp_path, RECYCLE_KEPT_BYTES, loads_again=True)
