"""A front's client connection: hits sent to a worker holding their model (links.py) and answered
as the main process would (answers.py); the rest relayed to the main process (rejoin.py)."""

from __future__ import annotations

import asyncio
import time
from asyncio import Future
from functools import partial
from typing import Any, NamedTuple

from modelhost.errors import (
    DeadlineExceeded,
    HandlerError,
    ModelhostError,
    ModelNotLoaded,
    ResponseTooLarge,
)
from modelhost.fronts.answers import Dated, failure, head_and_body, hit_headers
from modelhost.fronts.heads import END, HIT_START, HeadReader, Hit
from modelhost.fronts.links import Key, Outcome, Router, WorkerLink
from modelhost.fronts.messages import Sample
from modelhost.fronts.rejoin import Followed
from modelhost.fronts.relay import KEEP_ALIVE_S
from modelhost.http.handler_heads import handler_head
from modelhost.http.instance import INSTANCE_HEADER
from modelhost.http.middleware import TENANT_HEADER
from modelhost.workers.answers import check_response_size
from modelhost.workers.messages import Failure, item_of

# status, the bytes to write, the error type recorded, infer ms, and the body's bytes
Replied = tuple[int, bytes, str | None, float, int]

BIG_BYTES = 1 << 20  # a larger request streams through the relay; more pipelined waits
DATED = Dated()


def expire(outcome: Future[Outcome], link: WorkerLink, key: Key, timeout_s: float) -> None:
    """Answer a request past its deadline as the main process would; its batch runs on."""
    if outcome.done():
        return
    queued = any(each.outcome is outcome for each in link.waiting.get(key, ()))
    where = "in the queue" if queued else "running in a worker"
    outcome.set_exception(DeadlineExceeded.past_response_timeout(key[0], where, timeout_s))


class Relay(Exception):
    """This request, and the rest of the connection, go to the main process."""


class Asked(NamedTuple):
    """A hit on its way to a worker: its head, body and size, and when it arrived."""

    hit: Hit
    body: bytes
    size: int  # its bytes in the connection's buffer
    arrived: float  # epoch seconds
    started: float  # perf_counter seconds
    charged: str = ""  # the tenant it is charged to; "": tenants are off

    @property
    def key(self) -> Key:
        return self.hit.model, self.charged

    @property
    def tenant(self) -> str | None:
        """None: tenants are off."""
        return self.charged or None


class DirectSide(asyncio.Protocol):
    """One client's connection while the front answers its requests itself.

    A hit is sent to its worker and answered from its outcome's callback: no task a request.
    """

    def __init__(self, front: int, upstream: str, router: Router, connections: set[Any]) -> None:
        self.front, self.upstream, self.router = front, upstream, router
        self.connections = connections
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()  # from the first byte of the request being answered
        self.busy = False  # a request is being answered, or the connection was handed on
        self.ended = self.stopping = False
        self.loop = asyncio.get_running_loop()  # made by the server's protocol factory
        self.due = self.timer_at = 0.0  # loop times: closed unless busy; the timer's
        self.timer: asyncio.TimerHandle | None = None
        self.body_started = 0.0  # loop time; 0: no body on its way
        self.paused = False  # reading waits while the answered request's followers pile up
        self.write_paused = False  # answers wait on the client
        self.write_timer: asyncio.TimerHandle | None = None
        self.heads = HeadReader()
        # a hit whose body is on its way
        self.waiting_for: tuple[Hit, int, str] | None = None
        self.relay: Followed | None = None  # kept from the connection's last relay

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
        parked = self.relay.unpark() if self.relay is not None else None
        if parked is not None and parked.transport is not None:
            parked.transport.close()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self._stop_write_timer()

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.transport is not None:
            self.transport.pause_reading()
        timeout_s = self.router.table.pace.send_timeout_s
        self._stop_write_timer()
        self.write_timer = self.loop.call_later(timeout_s, self._left_unread)

    def resume_writing(self) -> None:
        self.write_paused = False
        self._stop_write_timer()
        if self.transport is None:
            return
        if not self.busy:
            if self.buffer:
                self._next()
            else:
                self._wait_idle()
        self._read_on()

    def _read_on(self) -> None:
        """Unless answers wait on the client, or whole requests here."""
        if self.write_paused or self.transport is None:
            return
        if self.busy and len(self.buffer) > BIG_BYTES:
            return
        self.paused = False
        self.transport.resume_reading()

    def _left_unread(self) -> None:
        self.write_timer = None
        if self.transport is not None:
            self.transport.abort()  # close() would wait for the unread answers

    def _stop_write_timer(self) -> None:
        if self.write_timer is not None:
            self.write_timer.cancel()
            self.write_timer = None

    def stop(self) -> None:
        """The front drains: close once the request being answered has been."""
        self.stopping = True
        if not self.busy and self.transport is not None:
            self.transport.close()

    def _wait_idle(self) -> None:
        """Close the connection once idle for KEEP_ALIVE_S."""
        self._close_at(self.loop.time() + KEEP_ALIVE_S)

    def _wait_for_body(self, head_bytes: int) -> None:
        """Closed if it keeps no pace."""
        now = self.loop.time()
        started = self.body_started = self.body_started or now
        received = len(self.buffer) - head_bytes
        self._close_at(self.router.table.pace.due(started, received, now))

    def _close_at(self, due: float) -> None:
        """One timer, moved on only as it fires early."""
        self.due = due
        if self.timer is not None and self.timer_at <= due:
            return
        if self.timer is not None:
            self.timer.cancel()
        self.timer, self.timer_at = self.loop.call_at(due, self._on_due), due

    def _on_due(self) -> None:
        self.timer = None
        if self.busy or self.transport is None:
            return  # answering: it waits again once idle
        if self.loop.time() < self.due:  # moved on since
            self.timer, self.timer_at = self.loop.call_at(self.due, self._on_due), self.due
        else:
            self.transport.close()

    def _next(self) -> None:
        """Answer the next request if it is here whole; relay it if it is not a plain hit."""
        if self.transport is None or not self.buffer:
            return
        if self.waiting_for is None:
            end = self.buffer.find(END)
            # a head cut short, slow or huge: the main process's limits and deadlines
            if end < 0 or not self.buffer.startswith(HIT_START):
                self._relay()
                return
            head_bytes = end + len(END)
            hit = self.heads.hit_of(bytes(self.buffer[:head_bytes]), self.router.table)
            if hit is None:
                self._relay()
                return
            charged: str | None = ""
            if self.router.tenants is not None:
                charged = self.router.tenants.of(hit.model, self.heads.read.headers)
            if charged is None:
                self._relay()
                return
            self.waiting_for = hit, head_bytes, charged
        hit, head_bytes, charged = self.waiting_for
        size = head_bytes + hit.body_bytes
        if len(self.buffer) < size:  # its body is on its way
            if size > BIG_BYTES:
                self._relay()  # streamed to the main process rather than held here
            else:
                self._wait_for_body(head_bytes)
            return
        self.waiting_for, self.body_started = None, 0.0
        self.busy = True
        body = bytes(self.buffer[head_bytes:size])
        self.heads.body(body)
        self._ask(Asked(hit, body, size, time.time(), time.perf_counter(), charged=charged))

    def _ask(self, asked: Asked) -> None:
        """Send the hit to a worker holding its model; relay it where the table names none."""
        router = self.router
        path = router.worker_of(asked.key)
        if path is None:
            self._relay()
            return
        router.in_flight += 1
        link = router.links.get(path)
        if link is None:
            asyncio.ensure_future(self._open_and_send(path, asked))
        else:
            self._send(link, asked)

    async def _open_and_send(self, path: str, asked: Asked) -> None:
        try:
            link = await self.router.link(path)
        except OSError:  # the worker is gone: the main process heals it
            self.router.in_flight -= 1
            self._relay()
            return
        self._send(link, asked)

    def _send(self, link: WorkerLink, asked: Asked) -> None:
        """The hit into its model's next batch, answered once its outcome is in."""
        hit, router = asked.hit, self.router
        table = router.table
        item = item_of(hit, len(asked.body))
        queue_ms = (time.perf_counter() - asked.started) * 1000
        size, key = table.batch_sizes.get(hit.model, 1), asked.key
        outcome = link.infer(key, item, asked.body, size)
        timeout_s = table.response_timeout_s
        timer = router.deadlines.add(timeout_s, partial(expire, outcome, link, key, timeout_s))
        outcome.add_done_callback(partial(self._settled, asked, queue_ms, timer))

    def _settled(self, asked: Asked, queue_ms: float, timer: int, outcome: Future[Outcome]) -> None:
        router = self.router
        router.deadlines.remove(timer)
        router.in_flight -= 1
        try:
            status, data, error, infer_ms, out = self._reply(asked, outcome, queue_ms)
        except Relay:
            self._relay()
            return
        transport = self.transport
        if transport is None:
            return
        transport.write(data)
        duration_s = time.perf_counter() - asked.started
        hit = asked.hit
        sample = Sample(
            time=asked.arrived,
            route=hit.route,
            model=hit.model,
            status=status,
            duration_s=duration_s,
            bytes_in=len(asked.body),
            bytes_out=out,
            infer_ms=infer_ms,
            error=error,
            tenant=asked.tenant,
        )
        router.answered(sample)
        del self.buffer[: asked.size]
        self.busy = False
        if self.stopping or (self.ended and not self.buffer):
            transport.close()
            return
        if self.write_paused:
            return  # resume_writing goes on
        if self.buffer:
            self._next()
        else:
            self._wait_idle()
        if self.paused:
            self._read_on()

    def _reply(self, asked: Asked, outcome: Future[Outcome], queue_ms: float) -> Replied:
        """The worker's answer as the main process writes it; Relay where it has none."""
        hit, tenant = asked.hit, asked.tenant
        try:
            answer, payload, infer_ms = outcome.result()
        except (OSError, ConnectionError):
            raise Relay from None  # the worker is gone: the main process heals it
        except DeadlineExceeded as late:
            return self._failure(hit, late, 0.0, tenant)
        if isinstance(answer, Failure):
            refused = answer.rebuild()
            if isinstance(refused, ModelNotLoaded):
                raise Relay  # the table was stale: the main process loads it
            return self._failure(hit, refused, 0.0, tenant)
        if answer.failure is not None:
            return self._failure(hit, answer.failure.rebuild(), infer_ms, tenant)
        try:
            check_response_size(len(payload), self.router.table.max_response_bytes)
            status, own = (200, []) if answer.custom is None else handler_head(answer.custom)
        except (ResponseTooLarge, HandlerError) as refused:
            return self._failure(hit, refused, infer_ms, tenant)
        timings = {"queue": queue_ms, "download": 0.0, "load": 0.0, "infer": infer_ms}
        headers = hit_headers(answer.content_type, payload, timings, hit)
        headers += self._own_headers(tenant, hit.oip) + own
        data = head_and_body(status, DATED.now(), headers, payload)
        return status, data, None, infer_ms, len(payload)

    def _failure(
        self, hit: Hit, error: ModelhostError, infer_ms: float, tenant: str | None
    ) -> Replied:
        status, kind, headers, body = failure(error, hit)
        headers += self._own_headers(tenant, hit.oip)
        data = head_and_body(status, DATED.now(), headers, body)
        return status, data, kind, infer_ms, len(body)

    def _own_headers(self, tenant: str | None, oip: bool) -> list[tuple[bytes, bytes]]:
        """The instance's header and the tenant's, in the main process's order."""
        instance = (INSTANCE_HEADER, self.router.table.instance.encode("latin-1"))
        if tenant is None:
            return [instance]
        own = (TENANT_HEADER, tenant.encode())
        return [own, instance] if oip else [instance, own]

    def _relay(self) -> None:
        """Hand the connection to the relay, from the first byte of this request on."""
        transport = self.transport
        if transport is None:
            return
        self.busy = True  # the idle timer, if due meanwhile, lets the connection be
        self.write_paused = self.paused = False  # the relay's to follow
        self._stop_write_timer()
        self.connections.discard(self)
        relay = self.relay
        if relay is None:
            relay = self.relay = Followed(self.front, self.upstream, self.connections, self.rejoin)
        relay.take(bytes(self.buffer))
        relay.ended_early = self.ended
        self.buffer.clear()
        transport.set_protocol(relay)
        relay.connection_made(transport)

    def rejoin(self, transport: asyncio.Transport, data: bytes) -> None:
        """The relay's requests are answered: this side answers `data` on."""
        self.busy = self.paused = False
        self.waiting_for = None
        if not self.heads.whole:  # a relayed body never reached its parser
            self.heads = HeadReader()
        transport.set_protocol(self)
        self.connection_made(transport)
        transport.resume_reading()
        if data:
            self.data_received(data)
