"""A front's client connection: hits answered here, and the rest relayed from the first miss.

A hit goes to a worker holding its model (links.py) and is answered as the main process would
(answers.py). The first request the front does not answer itself (heads.py) turns the
connection into a relayed one (relay.py) for good, that request's bytes first, so the main
process sees what the client sent, in order.
"""

from __future__ import annotations

import asyncio
import time
from asyncio import Future
from typing import Any

from modelhost.errors import DeadlineExceeded, ModelhostError, ModelNotLoaded, ResponseTooLarge
from modelhost.fronts.answers import Dated, failure, head_and_body, hit_headers
from modelhost.fronts.heads import END, Hit, hit_of
from modelhost.fronts.links import Outcome, Router, WorkerLink
from modelhost.fronts.messages import Sample
from modelhost.fronts.relay import ClientSide
from modelhost.http.instance import INSTANCE_HEADER
from modelhost.protocols.bodies import check_response_size
from modelhost.workers.messages import Failure, Item

KEEP_ALIVE_S = 5.0  # uvicorn's timeout_keep_alive, which the main process keeps
BIG_BYTES = 1 << 20  # a larger request streams through the relay; more pipelined waits
DATED = Dated()


def expire(outcome: Future[Outcome], link: WorkerLink, model: str, timeout_s: float) -> None:
    """Answer a request past its deadline as the main process would; its batch runs on."""
    if outcome.done():
        return
    queued = any(each.outcome is outcome for each in link.waiting.get(model, ()))
    where = "in the queue" if queued else "running in a worker"
    outcome.set_exception(DeadlineExceeded.past_response_timeout(model, where, timeout_s))


class Relay(Exception):
    """This request, and the rest of the connection, go to the main process."""


class DirectSide(asyncio.Protocol):
    """One client's connection while the front answers its requests itself."""

    def __init__(self, front: int, upstream: str, router: Router, connections: set[Any]) -> None:
        self.front, self.upstream, self.router = front, upstream, router
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()  # from the first byte of the request being answered
        self.busy = False  # a request is being answered, or the connection was handed on
        self.ended = self.stopping = False
        self.idle: asyncio.TimerHandle | None = None
        self.paused = False  # reading waits while the answered request's followers pile up

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        self.connections.add(self)
        self._wait_idle()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()
        elif len(self.buffer) > BIG_BYTES and self.transport is not None:
            self.transport.pause_reading()
            self.paused = True

    def eof_received(self) -> bool:
        self.ended = True
        return self.busy or bool(self.buffer)  # answer what was sent, then close

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self.connections.discard(self)
        if self.idle is not None:
            self.idle.cancel()

    def stop(self) -> None:
        """The front drains: close once the request being answered has been."""
        self.stopping = True
        if not self.busy and self.transport is not None:
            self.transport.close()

    def _wait_idle(self) -> None:
        if self.idle is not None:
            self.idle.cancel()
        loop = asyncio.get_running_loop()
        self.idle = loop.call_later(KEEP_ALIVE_S, self._idle_for_long)

    def _idle_for_long(self) -> None:
        if not self.busy and not self.buffer and self.transport is not None:
            self.transport.close()

    def _next(self) -> None:
        """Answer the next request if it is here whole; relay it if it is not a plain hit."""
        if self.transport is None or not self.buffer:
            return
        end = self.buffer.find(END)
        if end < 0:  # a head cut short, slow or huge: the main process's limits and deadlines
            self._relay()
            return
        head_bytes = end + len(END)
        hit = hit_of(bytes(self.buffer[:head_bytes]), self.router.table.max_request_bytes)
        if hit is None:
            self._relay()
            return
        size = head_bytes + hit.body_bytes
        if len(self.buffer) < size:  # its body is on its way
            if size > BIG_BYTES:
                self._relay()  # streamed to the main process rather than held here
            return
        self.busy = True
        body = bytes(self.buffer[head_bytes:size])
        asyncio.ensure_future(self._answer(hit, body, size))

    async def _answer(self, hit: Hit, body: bytes, size: int) -> None:
        arrived, started = time.time(), time.perf_counter()
        self.router.in_flight += 1
        try:
            status, data, error, infer_ms = await self._ask(hit, body, started)
        except Relay:
            self._relay()
            return
        finally:
            self.router.in_flight -= 1
        transport = self.transport
        if transport is None:
            return
        transport.write(data)
        duration_s = time.perf_counter() - started
        out = len(data) - data.index(END) - len(END)  # the body's, as the main process counts
        sample = Sample(
            time=arrived,
            route=hit.route,
            model=hit.model,
            status=status,
            duration_s=duration_s,
            bytes_in=len(body),
            bytes_out=out,
            infer_ms=infer_ms,
            error=error,
        )
        self.router.answered(sample)
        del self.buffer[:size]
        self.busy = False
        if self.paused:
            self.paused = False
            transport.resume_reading()
        if self.stopping or (self.ended and not self.buffer):
            transport.close()
        elif self.buffer:
            self._next()
        else:
            self._wait_idle()

    async def _ask(
        self, hit: Hit, body: bytes, started: float
    ) -> tuple[int, bytes, str | None, float]:
        """The worker's answer as (status, bytes, error type, infer ms); Relay where it has none."""
        path = self.router.worker_of(hit.model)
        if path is None:
            raise Relay
        item = Item(hit.content_type, hit.accept, hit.params, len(body))
        try:
            link = await self.router.link(path)
            queue_ms = (time.perf_counter() - started) * 1000
            answer, payload, infer_ms = await self._within_deadline(link, hit, item, body)
        except (OSError, ConnectionError):
            raise Relay from None  # the worker is gone: the main process heals it
        except DeadlineExceeded as late:
            return self._failure(hit, late, 0.0)
        if isinstance(answer, Failure):
            refused = answer.rebuild()
            if isinstance(refused, ModelNotLoaded):
                raise Relay  # the table was stale: the main process loads it
            return self._failure(hit, refused, 0.0)
        if answer.failure is not None:
            return self._failure(hit, answer.failure.rebuild(), infer_ms)
        try:
            check_response_size(len(payload), self.router.table.max_response_bytes)
        except ResponseTooLarge as large:
            return self._failure(hit, large, infer_ms)
        timings = {"queue": queue_ms, "download": 0.0, "load": 0.0, "infer": infer_ms}
        headers = hit_headers(answer.content_type, payload, timings, hit.oip)
        headers.append(self._instance())
        return 200, head_and_body(200, DATED.now(), headers, payload), None, infer_ms

    async def _within_deadline(
        self, link: WorkerLink, hit: Hit, item: Item, body: bytes
    ) -> Outcome:
        """The worker's outcome, or DeadlineExceeded past the server's response timeout."""
        table = self.router.table
        batch_size = table.batch_sizes.get(hit.model, 1)
        outcome = link.infer(hit.model, item, body, batch_size)
        timeout_s = table.response_timeout_s
        loop = asyncio.get_running_loop()
        timer = loop.call_later(timeout_s, lambda: expire(outcome, link, hit.model, timeout_s))
        try:
            return await outcome
        finally:
            timer.cancel()

    def _failure(
        self, hit: Hit, error: ModelhostError, infer_ms: float
    ) -> tuple[int, bytes, str | None, float]:
        status, kind, headers, body = failure(error, hit.oip)
        headers.append(self._instance())
        return status, head_and_body(status, DATED.now(), headers, body), kind, infer_ms

    def _instance(self) -> tuple[bytes, bytes]:
        return INSTANCE_HEADER, self.router.table.instance.encode("latin-1")

    def _relay(self) -> None:
        """Hand the connection to the relay, from the first byte of this request on."""
        transport = self.transport
        if transport is None:
            return
        self.busy = True
        if self.idle is not None:
            self.idle.cancel()
        self.connections.discard(self)
        relay = ClientSide(self.front, self.upstream, self.connections)
        relay.early += self.buffer
        relay.ended_early = self.ended
        self.buffer.clear()
        transport.set_protocol(relay)
        relay.connection_made(transport)
