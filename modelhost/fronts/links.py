"""A front's connections to the workers' direct sockets, and the table that says which to use.

A link keeps a batch in flight a model, tenant and worker thread: what arrives meanwhile goes as
the next batch, at most the model's batch size (the main process's rule). A model that batches
nothing has each request sent at once, to wait in the worker's fair order rather than here.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from typing import Any, NamedTuple

from modelhost.fronts.deadlines import Deadlines
from modelhost.fronts.messages import Report, Sample, Table
from modelhost.fronts.tenants import FrontTenants
from modelhost.workers.messages import (
    Answer,
    Answered,
    Failed,
    Failure,
    Infer,
    Item,
    Reply,
    decode_reply,
    encode,
)
from modelhost.workers.wire import Frame, FrameBuffer, reply_cap
from modelhost.workers.wire import encode as encode_frame

logger = logging.getLogger("modelhost.fronts")  # warnings reach stderr unconfigured

# a request's answer (or the whole batch's failure), its body, and the batch's infer ms
Outcome = tuple[Answer | Failure, bytes, float]
Key = tuple[str, str]  # a model, and the tenant its batches are charged to ("": tenants off)


class Waiting(NamedTuple):
    item: Item
    body: bytes
    outcome: asyncio.Future[Outcome]


class Batch(NamedTuple):
    """A batch in the worker: its model and tenant, its requests, and the most requests a
    batch."""

    key: Key
    waiting: list[Waiting]
    batch_size: int


class WorkerLink(asyncio.Protocol):
    """One front's connection to one worker: batches out, replies matched back by request id."""

    def __init__(self, path: str, router: Router) -> None:
        self.path, self.router, self.links = path, router, router.links
        self.transport: asyncio.Transport | None = None
        self.frames = FrameBuffer(self._cap)
        self.sent: dict[int, Batch] = {}  # request id → the batch it carries
        self.ids = itertools.count(1)
        self.waiting: dict[Key, list[Waiting]] = {}  # requests for the key's next batch
        self.in_flight: dict[Key, int] = {}  # batches in the worker

    def infer(
        self,
        key: Key,
        item: Item,
        body: bytes,
        batch_size: int,
    ) -> asyncio.Future[Outcome]:
        """One request's outcome, sent in the next batch of its model and tenant."""
        outcome: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        waiting = self.waiting.get(key)
        if waiting is None:
            waiting = self.waiting[key] = []
        waiting.append(Waiting(item, body, outcome))
        if not self._sends_now(key):
            self.router.pressed.add(key[0])  # it waits, for a next batch or in the worker
            if batch_size > 1:
                return outcome
        self._send(key, batch_size)
        return outcome

    def takes(self, key: Key, room: int) -> bool:
        """Whether a request of `key` is sent now or joins a next batch with room."""
        if self._sends_now(key):
            return True
        return room > 1 and len(self.waiting.get(key, ())) < room

    def _sends_now(self, key: Key) -> bool:
        """Whether `key` has fewer batches in the worker than the worker has threads."""
        return self.in_flight.get(key, 0) < self.router.table.slots

    def _send(self, key: Key, batch_size: int) -> None:
        waiting = self.waiting.pop(key, [])
        size = max(1, batch_size)
        batch, rest = (waiting, None) if len(waiting) <= size else (waiting[:size], waiting[size:])
        if rest:
            self.waiting[key] = rest
        if not batch:
            return
        transport = self.transport
        if transport is None or transport.is_closing():
            settle(batch, None, b"", ConnectionError(f"{self.path} is closed"))
            self._send(key, batch_size)  # the rest fail alike
            return
        self.in_flight[key] = self.in_flight.get(key, 0) + 1
        request_id = next(self.ids)
        self.sent[request_id] = Batch(key, batch, batch_size)
        items = tuple(each.item for each in batch)
        body = batch[0].body if len(batch) == 1 else b"".join(each.body for each in batch)
        tenants = self.router.tenants
        weight = 1.0 if tenants is None else tenants.weight(key[1])
        infer = Infer(key[0], items, tenant=key[1], weight=weight)
        transport.write(encode_frame(Frame(request_id, encode(infer), body)))

    def _ended(self, sent: Batch, reply: Reply, payload: bytes) -> None:
        model = sent.key[0]
        left = self.in_flight.pop(sent.key) - 1
        if left:
            self.in_flight[sent.key] = left
        settle(sent.waiting, reply, payload, None)
        if isinstance(reply, Answered):
            busy = self.router.busy_s
            busy[model] = busy.get(model, 0.0) + reply.infer_ms / 1000
        if self.waiting.get(sent.key):
            self._send(sent.key, sent.batch_size)

    def _cap(self, request_id: int) -> int:
        sent = self.sent.get(request_id)
        answers = 0 if sent is None else len(sent.waiting)
        return reply_cap(answers, self.router.table.max_response_bytes)

    def connection_made(self, transport: Any) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.frames.feed(data)
        except ConnectionError as error:
            assert self.transport is not None
            logger.warning("a front dropped its link to worker socket %s: %s", self.path, error)
            self.transport.close()
            return
        for frame in frames:
            sent = self.sent.pop(frame.request_id, None)
            if sent is not None:
                self._ended(sent, decode_reply(frame.header), frame.payload)

    def connection_lost(self, exc: Exception | None) -> None:
        """The worker is gone: its batches fail, and their requests are relayed."""
        self.transport = None
        if self.links.get(self.path) is self:
            del self.links[self.path]
        gone = ConnectionError(f"worker {self.path} closed")
        for sent in self.sent.values():
            settle(sent.waiting, None, b"", gone)
        self.sent.clear()
        for waiting in self.waiting.values():
            settle(waiting, None, b"", gone)
        self.waiting.clear()


def settle(
    batch: list[Waiting], reply: Reply | None, payload: bytes, error: Exception | None
) -> None:
    """Each request's outcome from its batch's reply: its answer and body, or the failure."""
    if isinstance(reply, Answered) and len(reply.answers) == len(batch):
        for each, (answer, body) in zip(batch, reply.bodies(payload), strict=True):
            if not each.outcome.done():
                each.outcome.set_result((answer, body, reply.infer_ms))
        return
    for each in batch:
        if each.outcome.done():
            continue
        if isinstance(reply, Failed):
            each.outcome.set_result((reply.failure, b"", 0.0))
        else:
            each.outcome.set_exception(error or ConnectionError("an answer of the wrong shape"))


class Router:
    """The main process's latest table, the links to workers, and the answers to report."""

    def __init__(self, front: int = 0) -> None:
        self.front = front
        self.table = Table({})
        self.tenants: FrontTenants | None = None
        self.links: dict[str, WorkerLink] = {}
        self.opening: dict[str, asyncio.Future[WorkerLink]] = {}
        self.turns = itertools.count()
        self.samples: list[Sample] = []
        self.busy_s: dict[str, float] = {}  # model → worker seconds since the last report
        self.pressed: set[str] = set()  # models whose requests waited since the last report
        self.in_flight = self.in_flight_reported = 0  # requests being answered here
        self.deadlines = Deadlines()

    def take(self, table: Table) -> None:
        if table.tenants != self.table.tenants:
            self.tenants = None if table.tenants is None else FrontTenants(table.tenants)
        self.table = table

    def worker_of(self, key: Key) -> str | None:
        """The direct socket of a worker holding the key's model, from this front's own on the
        first whose next batch has room (else in turn); None: relay the request."""
        model, table = key[0], self.table
        places = table.routes.get(model)
        if not places:
            return None
        room = table.batch_sizes.get(model, 1)
        for turn in range(len(places)):
            path = table.sockets[places[(self.front + turn) % len(places)]]
            link = self.links.get(path)
            if link is None or link.takes(key, room):
                return path
        return table.sockets[places[next(self.turns) % len(places)]]

    async def link(self, path: str) -> WorkerLink:
        """The open link to `path`; OSError where the worker is not there."""
        link = self.links.get(path)
        if link is not None:
            return link
        opening = self.opening.get(path)
        if opening is None:
            opening = asyncio.ensure_future(self._open(path))
            self.opening[path] = opening
            opening.add_done_callback(lambda _: self.opening.pop(path, None))
        return await asyncio.shield(opening)

    async def _open(self, path: str) -> WorkerLink:
        loop = asyncio.get_running_loop()
        _, link = await loop.create_unix_connection(lambda: WorkerLink(path, self), path)
        self.links[path] = link
        return link

    def answered(self, sample: Sample) -> None:
        self.samples.append(sample)

    def take_report(self) -> Report | None:
        """What happened since the last report; None: nothing."""
        in_flight = self.in_flight
        if not (
            self.samples or self.busy_s or self.pressed or in_flight != self.in_flight_reported
        ):
            return None
        report = Report(self.samples, self.busy_s, sorted(self.pressed), in_flight)
        self.samples, self.busy_s, self.pressed = [], {}, set()
        self.in_flight_reported = in_flight
        return report
