"""The pool's end of a worker's socket, against a scripted worker on a real Unix socket: replies
cut at any byte or sent several at once reach their calls; a worker that dies mid-frame fails
its calls with WorkerDied; a worker that never answers is killed at the call's deadline."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvloop

from modelhost.errors import DeadlineExceeded, WorkerDied
from modelhost.records.events import EventLog
from modelhost.workers.handle import WorkerHandle
from modelhost.workers.messages import (
    Answer,
    Answered,
    Hello,
    Infer,
    Item,
    Load,
    Loaded,
    Unload,
    Unloaded,
    decode_request,
    encode,
)
from modelhost.workers.pool import WorkerConnection, WorkerPool
from modelhost.workers.sandbox import scratch_path
from modelhost.workers.wire import MAX_HEADER_BYTES, PREFIX, Frame, FrameBuffer, reply_cap
from modelhost.workers.wire import encode as encode_frame

Scenario = Callable[[WorkerPool, WorkerHandle, socket.socket], Awaitable[None]]


def with_scripted_worker(tmp_path: Path, scenario: Scenario, **settings: float) -> WorkerPool:
    """A pool (no template) whose one worker is a socket the scenario speaks for."""
    pool = WorkerPool(1, 1, tmp_path, EventLog(), **settings)  # type: ignore[arg-type]
    pool.killed: list[int] = []  # type: ignore[misc]

    async def replace(worker: WorkerHandle) -> None:  # no template here to fork from
        return None

    pool._replace = replace  # type: ignore[method-assign]
    pool._end_process = lambda worker: pool.killed.append(worker.worker_id)  # type: ignore[attr-defined,method-assign]

    async def run() -> None:
        await asyncio.wait_for(connected(), 10)

    async def connected() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_unix_server(lambda: WorkerConnection(pool), pool.socket_path)
        theirs = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        theirs.setblocking(False)
        await loop.sock_connect(theirs, pool.socket_path)
        pool.table.forking[1] = loop.create_future()  # as the template's fork would
        await loop.sock_sendall(theirs, encode_frame(Frame(0, encode(Hello(1, os.getpid(), 0)))))
        while 1 not in pool.workers:
            await asyncio.sleep(0.001)
        try:
            await scenario(pool, pool.workers[1], theirs)
        finally:
            theirs.close()
            server.close()

    uvloop.run(run())  # the server's loop
    return pool


async def requests_of(sock: socket.socket, count: int) -> list[Frame]:
    """The next `count` frames the pool sent the worker."""
    buffer, frames = FrameBuffer(), []
    while len(frames) < count:
        frames += buffer.feed(await asyncio.get_running_loop().sock_recv(sock, 1 << 16))
    return frames


def reply(request: Frame, freed: int) -> bytes:
    return encode_frame(Frame(request.request_id, encode(Unloaded(freed))))


def unload_calls(pool: WorkerPool, worker: WorkerHandle, count: int) -> list[asyncio.Future[Any]]:
    """`count` unloads (m0, m1, ...) sent to the scripted worker, not yet answered."""
    return [
        asyncio.ensure_future(pool.call(worker, Unload(f"m{i}"), Unloaded, model=f"m{i}"))
        for i in range(count)
    ]


def test_replies_cut_at_every_byte_reach_their_calls(tmp_path: Path) -> None:
    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        calls = unload_calls(pool, worker, 3)
        requests = await requests_of(sock, 3)
        assert [decode_request(r.header) for r in requests] == [Unload(f"m{i}") for i in range(3)]
        data = b"".join(reply(r, freed) for r, freed in zip(requests, [10, 20, 30], strict=True))
        for i in range(len(data)):  # one byte per read
            await loop.sock_sendall(sock, data[i : i + 1])
            await asyncio.sleep(0)
        assert [(await call)[0].freed for call in calls] == [10, 20, 30]

    with_scripted_worker(tmp_path, scenario)


def test_replies_in_one_read_reach_calls(tmp_path: Path) -> None:
    """Several replies in one read reach their calls in any order."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        calls = unload_calls(pool, worker, 4)
        requests = await requests_of(sock, 4)
        data = b"".join(reply(r, i) for i, r in reversed(list(enumerate(requests))))
        await asyncio.get_running_loop().sock_sendall(sock, data)
        assert [(await call)[0].freed for call in calls] == [0, 1, 2, 3]
        assert not worker.pending

    with_scripted_worker(tmp_path, scenario)


def test_worker_dying_mid_frame_fails_calls(tmp_path: Path) -> None:
    """A worker that dies mid-frame fails its calls with WorkerDied."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        calls = unload_calls(pool, worker, 2)
        first, second = await requests_of(sock, 2)
        half = reply(second, 2)[:10]
        await asyncio.get_running_loop().sock_sendall(sock, reply(first, 1) + half)
        assert (await calls[0])[0].freed == 1
        sock.close()  # dies with half a frame sent
        with pytest.raises(WorkerDied, match="died while serving model m1"):
            await calls[1]
        assert not worker.alive and 1 not in pool.workers

    with_scripted_worker(tmp_path, scenario)


def test_a_dead_workers_scratch_folder_is_removed(tmp_path: Path) -> None:
    """A sandboxed worker's scratch folder goes with it, so replacements leave no files."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        scratch = scratch_path(tmp_path, worker.pid)
        scratch.mkdir()
        (scratch / "unpacked.bin").write_bytes(b"x" * 1024)
        sock.close()
        for _ in range(1000):
            if not scratch.exists():
                break
            await asyncio.sleep(0.005)
        assert not scratch.exists() and not worker.alive

    with_scripted_worker(tmp_path, scenario)


def test_silent_worker_is_killed_at_deadline(tmp_path: Path) -> None:
    """A worker that never answers is killed at the deadline."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        with pytest.raises(DeadlineExceeded, match="did not finish the unload of model m"):
            await pool.call(worker, Unload("m"), Unloaded, model="m")
        assert pool.killed == [1]  # type: ignore[attr-defined]
        assert not worker.pending

    with_scripted_worker(tmp_path, scenario, load_timeout_s=0.05)


def test_stuck_worker_killed_after_caller_quits(
    tmp_path: Path,
) -> None:
    """A caller that gives up still leaves the deadline to kill a stuck worker."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        call = asyncio.ensure_future(pool.call(worker, Unload("m"), Unloaded, model="m"))
        await requests_of(sock, 1)
        call.cancel()
        while not pool.killed:  # type: ignore[attr-defined]
            await asyncio.sleep(0.01)
        assert not worker.pending

    with_scripted_worker(tmp_path, scenario, load_timeout_s=0.05)


def test_dropped_connection_reports_loss_first(
    tmp_path: Path,
) -> None:
    """A dropped connection reports its worker lost before anything else runs.

    The host forgets the worker's copies in the same callback that saw the connection drop:
    a request retried after its worker died went to the same dead copy while the loss waited
    for its task, died "again" and was answered 500 PoisonRequest (seen in CI)."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        lost: list[int] = []
        pool.attach(on_lost=lambda gone: lost.append(gone.worker_id), on_joined=lambda: None)
        call = asyncio.ensure_future(pool.call(worker, Unload("m"), Unloaded, model="m"))
        await requests_of(sock, 1)
        worker.transport.get_protocol().connection_lost(None)  # what the loop calls on a drop
        assert lost == [1] and not worker.alive and 1 not in pool.workers
        with pytest.raises(WorkerDied):
            await call
        with pytest.raises(WorkerDied):
            await pool.call(worker, Unload("m"), Unloaded, model="m")

    with_scripted_worker(tmp_path, scenario)


@pytest.mark.parametrize("breach", [b"\xff" * 64, b""], ids=["garbage", "hang-up"])
def test_a_worker_breaking_its_frames_is_killed(tmp_path: Path, breach: bytes) -> None:
    """Garbage on its socket, or its end shut, drops the worker and kills its process: left
    running, a worker that never reads again would hold memory and CPU that no one counts."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        call = asyncio.ensure_future(pool.call(worker, Unload("m"), Unloaded, model="m"))
        await requests_of(sock, 1)
        if breach:
            await asyncio.get_running_loop().sock_sendall(sock, breach)
        else:
            sock.shutdown(socket.SHUT_WR)
        with pytest.raises(WorkerDied):
            await call
        assert pool.killed == [1]  # type: ignore[attr-defined]

    with_scripted_worker(tmp_path, scenario)


def test_an_undecodable_reply_fails_its_call_at_once(tmp_path: Path) -> None:
    """A reply whose header does not decode fails its call with WorkerDied; the call was taken
    off the worker before the decode, so it waited for the response deadline instead."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        call = asyncio.ensure_future(pool.call(worker, Unload("m"), Unloaded, model="m"))
        (request,) = await requests_of(sock, 1)
        broken = PREFIX.pack(request.request_id, 1, 0) + b"\xc1"  # \xc1: never MessagePack
        await asyncio.get_running_loop().sock_sendall(sock, broken)
        with pytest.raises(WorkerDied):
            await call
        assert pool.killed == [1]  # type: ignore[attr-defined]

    with_scripted_worker(tmp_path, scenario)


@pytest.mark.parametrize("worker_id", [1, 4242], ids=["joined-id", "unawaited-id"])
def test_a_hello_no_fork_awaits_is_no_worker(tmp_path: Path, worker_id: int) -> None:
    """A second connection saying hello (a model's code dialing in, say) is refused: it takes
    no worker's place and gets no work, and its hang-up kills nothing."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        intruder = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        intruder.setblocking(False)
        await loop.sock_connect(intruder, pool.socket_path)
        hello = encode_frame(Frame(0, encode(Hello(worker_id, os.getpid(), 0))))
        await loop.sock_sendall(intruder, hello)
        assert await asyncio.wait_for(loop.sock_recv(intruder, 1), 5) == b""  # a hang-up
        intruder.close()
        await asyncio.sleep(0.05)
        assert pool.workers == {1: worker} and pool.killed == []  # type: ignore[attr-defined]

    with_scripted_worker(tmp_path, scenario)


def test_a_reply_of_another_kind_than_its_call_kills_the_worker(tmp_path: Path) -> None:
    """An Unloaded for a load: a worker answering out of kind is not ours, so it is dropped."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        call = asyncio.ensure_future(
            pool.call(worker, Load(model="m", path="m.joblib"), Loaded, model="m")
        )
        (request,) = await requests_of(sock, 1)
        await asyncio.get_running_loop().sock_sendall(sock, reply(request, 1))
        with pytest.raises(WorkerDied):
            await call
        assert pool.killed == [1]  # type: ignore[attr-defined]

    with_scripted_worker(tmp_path, scenario)


MAX_ANSWER_BYTES = 1024
ITEM = Item("application/json", "application/json", {}, 2)


def batch_of_two(pool: WorkerPool, worker: WorkerHandle) -> asyncio.Future[Any]:
    return asyncio.ensure_future(
        pool.call(worker, Infer("m", (ITEM, ITEM)), Answered, b"[][]", model="m")
    )


@pytest.mark.parametrize(
    ("kind", "claimed"),
    [("answer", reply_cap(2, MAX_ANSWER_BYTES) + 1), ("unload", MAX_HEADER_BYTES + 1)],
)
def test_a_reply_longer_than_its_call_may_carry_kills_the_worker(
    tmp_path: Path, kind: str, claimed: int
) -> None:
    """An answer to a batch of two claiming more than two bodies of max_response_size and a
    header, or an unload's reply more than a header: the worker is dropped as the prefix comes,
    and its call fails with WorkerDied, not at its deadline."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        if kind == "answer":
            call = batch_of_two(pool, worker)
        else:
            call = asyncio.ensure_future(pool.call(worker, Unload("m"), Unloaded, model="m"))
        (request,) = await requests_of(sock, 1)
        prefix = PREFIX.pack(request.request_id, 0, claimed)
        await asyncio.get_running_loop().sock_sendall(sock, prefix)
        with pytest.raises(WorkerDied):
            await call
        assert pool.killed == [1]  # type: ignore[attr-defined]

    with_scripted_worker(tmp_path, scenario, max_response_bytes=MAX_ANSWER_BYTES)


def test_answers_of_max_response_size_reach_their_call(tmp_path: Path) -> None:
    """Two bodies of max_response_size each: a reply as long as its call may carry is whole."""

    async def scenario(pool: WorkerPool, worker: WorkerHandle, sock: socket.socket) -> None:
        call = batch_of_two(pool, worker)
        (request,) = await requests_of(sock, 1)
        answers = (Answer("text/plain", MAX_ANSWER_BYTES),) * 2
        body = b"x" * 2 * MAX_ANSWER_BYTES
        answered = encode_frame(Frame(request.request_id, encode(Answered(answers, 1.0)), body))
        await asyncio.get_running_loop().sock_sendall(sock, answered)
        reply, payload = await call
        assert (len(reply.answers), payload) == (2, body) and pool.killed == []  # type: ignore[attr-defined]

    with_scripted_worker(tmp_path, scenario, max_response_bytes=MAX_ANSWER_BYTES)
