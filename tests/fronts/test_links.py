"""A link's batches: each request gets its own answer and body back, or the batch's failure."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from modelhost.fronts.links import Outcome, Router, Waiting, WorkerLink, settle
from modelhost.fronts.messages import Table, Tenancy
from modelhost.workers.messages import (
    Answer,
    Answered,
    Failed,
    Failure,
    Infer,
    Item,
    decode_request,
)
from modelhost.workers.wire import PREFIX, Frame, FrameBuffer, reply_cap


def batch_of(loop: asyncio.AbstractEventLoop, *bodies: bytes) -> list[Waiting]:
    return [
        Waiting(
            Item("application/json", "application/json", {}, len(body)), body, loop.create_future()
        )
        for body in bodies
    ]


def outcomes(batch: list[Waiting]) -> list[Outcome]:
    return [each.outcome.result() for each in batch]


async def settled(reply: object, payload: bytes, sizes: int = 2) -> list[Outcome]:
    loop = asyncio.get_running_loop()
    batch = batch_of(loop, *([b"[]"] * sizes))
    settle(batch, reply, payload, None)  # type: ignore[arg-type]
    return outcomes(batch)


def test_each_request_gets_its_own_body_of_the_batch() -> None:
    failed = Failure("modelhost.errors.HandlerError", "no")
    reply = Answered(
        (Answer("application/json", 3), Answer(failure=failed), Answer("text/csv", 2)), 1.5
    )
    answers = asyncio.run(settled(reply, b"[1]0\n", sizes=3))
    assert [(answer.content_type, body) for answer, body, _ in answers] == [
        ("application/json", b"[1]"),
        ("", b""),
        ("text/csv", b"0\n"),
    ]
    assert answers[1][0].failure == failed and {ms for _, _, ms in answers} == {1.5}


def test_a_whole_batch_failure_reaches_every_request() -> None:
    refusal = Failure("modelhost.errors.ModelNotLoaded", "not open")
    assert asyncio.run(settled(Failed(refusal), b"")) == [(refusal, b"", 0.0)] * 2


def test_a_change_of_the_requests_in_flight_alone_is_reported_once() -> None:
    router = Router()
    assert router.take_report() is None
    router.in_flight = 2
    report = router.take_report()
    assert report is not None and (report.samples, report.in_flight) == ([], 2)
    assert router.take_report() is None
    router.in_flight = 0
    report = router.take_report()
    assert report is not None and report.in_flight == 0


KEY = ("m", "")  # model m, tenants off


def picks(front: int, batch_size: int, count: int) -> list[str]:
    """The workers `front` sends `count` requests to, none answered meanwhile."""

    async def picked() -> list[str]:
        loop = asyncio.get_running_loop()
        router = Router(front)
        router.table = Table(
            {"m": [0, 1, 2]}, {"m": batch_size} if batch_size > 1 else {}, sockets=["a", "b", "c"]
        )
        router.links = {path: WorkerLink(path, router) for path in "abc"}
        chosen = []
        for _ in range(count):
            path = router.worker_of(KEY)
            assert path is not None
            chosen.append(path)
            link = router.links[path]
            if KEY in link.in_flight:
                link.waiting.setdefault(KEY, []).extend(batch_of(loop, b"[]"))
            link.in_flight[KEY] = 1  # sent as its own batch
        return chosen

    return asyncio.run(picked())


def test_a_front_fills_its_first_workers_next_batch_before_the_next_workers() -> None:
    """In turn, each worker got batches of one or two; front 1 starts at the second worker and
    moves on once a worker's next batch is full, so batches fill; in turn once all are full."""
    assert picks(front=1, batch_size=2, count=10) == [*"bbbcccaaa", "a"]


def test_without_batches_a_front_sends_to_a_worker_with_none_in_flight_first() -> None:
    """Waiting behind another request gains nothing where a batch holds one."""
    assert picks(front=2, batch_size=1, count=4) == [*"cab", "a"]


ITEM = Item("application/json", "application/json", {}, 2)


async def sent_to(worker: socket.socket) -> int:
    """The request id of the next batch a link sends `worker`."""
    loop, buffer = asyncio.get_running_loop(), FrameBuffer()
    while not (frames := buffer.feed(await loop.sock_recv(worker, 1 << 16))):
        pass
    return frames[0].request_id


Linked = tuple[Router, WorkerLink, socket.socket]


@contextlib.asynccontextmanager
async def linked(
    path: str, table: Table
) -> AsyncIterator[tuple[Router, WorkerLink, socket.socket]]:
    """A router taking `table`, its link to a worker's direct socket at `path`, and the
    worker's end."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    listener.setblocking(False)
    router = Router()
    router.take(table)
    link = await router.link(path)
    worker, _ = await asyncio.get_running_loop().sock_accept(listener)
    with listener, worker:
        yield router, link, worker


async def frames_sent(worker: socket.socket, count: int) -> list[Frame]:
    loop, buffer, frames = asyncio.get_running_loop(), FrameBuffer(), list[Frame]()
    while len(frames) < count:
        frames += buffer.feed(await asyncio.wait_for(loop.sock_recv(worker, 1 << 16), 30))
    return frames


def test_a_reply_longer_than_its_batch_may_carry_drops_the_link(tmp_path: Path) -> None:
    """A worker's direct socket claiming more than a body of max_response_size and a header for
    a batch of one: the front drops the link as the prefix comes, and the request fails as on a
    dead worker's link (relayed), not at its deadline."""
    path = str(tmp_path / "direct.sock")

    async def scenario() -> None:
        async with linked(
            path, Table({"m": [0]}, max_response_bytes=1024, sockets=[path])
        ) as linking:
            router, link, worker = linking
            outcome = link.infer(KEY, ITEM, b"[]", batch_size=1)
            request_id = await sent_to(worker)
            loop = asyncio.get_running_loop()
            await loop.sock_sendall(worker, PREFIX.pack(request_id, 0, reply_cap(1, 1024) + 1))
            with pytest.raises(ConnectionError):
                await asyncio.wait_for(outcome, 30)  # a guard: the red run waited for ever
            assert path not in router.links
            assert await loop.sock_recv(worker, 1) == b""  # the front's end is closed

    asyncio.run(scenario())


def test_a_models_requests_of_two_tenants_go_as_a_batch_each_named_for_its_tenant(
    tmp_path: Path,
) -> None:
    """Each tenant's requests for a model it shares are its own batches, each charged to it at
    its weight: the worker orders them fairly (workers/gather.py), and no tenant waits behind
    another's batch in the front."""
    path = str(tmp_path / "direct.sock")
    tenancy = Tenancy("header", weights={"b": 3.0})

    async def scenario() -> list[Frame]:
        async with linked(
            path, Table({"m": [0]}, {"m": 8}, tenants=tenancy, sockets=[path])
        ) as linking:
            _, link, worker = linking
            for tenant in ("a", "b", "a"):
                link.infer(("m", tenant), ITEM, b"[]", 8)
            return await frames_sent(worker, 2)

    sent = [decode_request(frame.header) for frame in asyncio.run(scenario())]
    assert [(i.model, i.tenant, i.weight, len(i.items)) for i in sent if isinstance(i, Infer)] == [
        ("m", "a", 1.0, 1),
        ("m", "b", 3.0, 1),
    ]


def test_a_front_keeps_a_batch_a_worker_thread_of_a_model_in_a_worker(tmp_path: Path) -> None:
    """A worker of two threads: a batching model's first two requests go at once, each its own
    batch, so both threads run them; the third waits for one to come back, to go in the next
    batch."""
    path = str(tmp_path / "direct.sock")

    async def scenario() -> tuple[list[int], int]:
        async with linked(path, Table({"m": [0]}, {"m": 4}, slots=2, sockets=[path])) as linking:
            _, link, worker = linking
            for _ in range(3):
                link.infer(KEY, ITEM, b"[]", 4)
            frames = await frames_sent(worker, 2)  # the red run waited here for ever
            return [frame.request_id for frame in frames], len(link.waiting[KEY])

    assert asyncio.run(scenario()) == ([1, 2], 1)


def test_a_model_that_batches_nothing_has_each_request_sent_at_once(tmp_path: Path) -> None:
    """Batch size 1, one worker thread: three requests go at once, to wait in the worker's fair
    order with the other senders' and tenants', and the model is reported as pressed."""
    path = str(tmp_path / "direct.sock")

    async def scenario() -> tuple[list[int], list[str]]:
        async with linked(path, Table({"m": [path]})) as linking:
            router, link, worker = linking
            for _ in range(3):
                link.infer(KEY, ITEM, b"[]", 1)
            frames = await frames_sent(worker, 3)  # the red run waited here for ever
            return [frame.request_id for frame in frames], sorted(router.pressed)

    assert asyncio.run(scenario()) == ([1, 2, 3], ["m"])
