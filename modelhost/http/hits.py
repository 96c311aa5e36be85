"""A connection's plain invocations answered on httptools; from the first other request on, the
connection is uvicorn's (docs/decisions.md, "Invocations before uvicorn")."""

from __future__ import annotations

import asyncio
import functools
import logging
import operator
from typing import Any

from starlette.types import Message
from uvicorn.protocols.http.flow_control import HIGH_WATER_LIMIT
from uvicorn.protocols.http.httptools_impl import HEADER_VALUE_RE, STATUS_LINE

from modelhost.http.head_limits import END_OF_HEAD
from modelhost.http.invocations import InvocationFastPath, Invocations
from modelhost.http.plain_heads import PlainHeads, Route
from modelhost.http.protocol import HeaderDeadlineProtocol, LateConnections
from modelhost.http.whole_response import Headers, WholeWriter

_name, _value = operator.itemgetter(0), operator.itemgetter(1)
logger = logging.getLogger("uvicorn.error")  # uvicorn's, for the refusals it would log
INTERNAL_ERROR_HEADERS = (  # uvicorn's answer to an app that returned without one
    (b"content-type", b"text/plain; charset=utf-8"),
    (b"content-length", b"21"),
    (b"connection", b"close"),
)


class HitSide(asyncio.Protocol):
    """One connection while its requests are plain invocations; then uvicorn's protocol."""

    uvicorn_class: type[HeaderDeadlineProtocol]  # one per server: see `hits_first`

    def __init__(self, config: Any, server_state: Any, app_state: Any, _loop: Any = None) -> None:
        self.config, self.server_state = config, server_state
        self.make_uvicorn = functools.partial(
            self.uvicorn_class, config=config, server_state=server_state, app_state=app_state
        )
        self.loop: asyncio.AbstractEventLoop = _loop or asyncio.get_event_loop()
        app = config.loaded_app  # wrapped by uvicorn, or logged by it: uvicorn's from the start
        plain = type(app) is InvocationFastPath and not config.access_log
        self.invocations: Invocations | None = app.invocations if plain else None
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()  # from the first byte of the request being answered
        self.busy = self.stopping = False
        self.write_paused = self.reading_paused = False
        self.heads = PlainHeads()
        self.waiting_for: tuple[Route, int, int] | None = None  # the head's bytes, the body's
        self._due: float | None = None  # when an idle connection, or a late body, is closed
        self._body_started = 0.0  # loop time; 0: no body on its way
        self._write_due: float | None = None  # unread answers: cut off then

    def connection_made(self, transport: Any) -> None:
        self.transport = transport
        if self.invocations is None:
            self._hand_on()
            return
        self.server_state.connections.add(self)
        cls = self.uvicorn_class
        self._due = self.loop.time() + cls.pace.timeout_s
        late = cls.late = cls.late or LateConnections(self.loop, cls.pace.timeout_s)
        late.watch(self)  # type: ignore[arg-type]  # it asks only close_if_late

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if not self.busy:
            self._next()
        elif len(self.buffer) > HIGH_WATER_LIMIT and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._forget()

    def pause_writing(self) -> None:
        self.write_paused = True
        self._write_due = self.loop.time() + self.uvicorn_class.pace.send_timeout_s
        if self.transport is not None:
            self.transport.pause_reading()

    def resume_writing(self) -> None:
        self.write_paused, self._write_due = False, None
        self._read_on()
        if not self.busy:  # a request that waited for the client to read
            self._next()

    def shutdown(self) -> None:
        """The server drains: close once the request under way is answered."""
        self.stopping = True
        if not self.busy and self.transport is not None:
            self.transport.close()

    def close_if_late(self, now: float) -> None:
        if self.transport is None:
            return
        if self._write_due is not None and self._write_due <= now:
            self._write_due = None
            self.transport.abort()  # close() would wait for the unread answers
        elif self._due is not None and self._due <= now:
            self._due = None
            self.transport.close()

    def _forget(self) -> None:
        self.server_state.connections.discard(self)
        if self.uvicorn_class.late is not None:
            self.uvicorn_class.late.forget(self)  # type: ignore[arg-type]

    def _next(self) -> None:
        """Answer the next request if it is here whole; hand on one that is not a plain hit."""
        if self.transport is None or not self.buffer:
            return
        if self.waiting_for is None:
            end = self.buffer.find(END_OF_HEAD)
            if end < 0:  # a head cut short, slow or huge: uvicorn's limits and deadlines
                self._hand_on()
                return
            head_bytes = end + len(END_OF_HEAD)
            assert self.invocations is not None  # else handed on at once
            limit = min(HIGH_WATER_LIMIT, self.invocations.max_request_bytes)
            plain = self.heads.plain(bytes(self.buffer[:head_bytes]), limit)
            if plain is None or self._over_limit():
                self._hand_on()
                return
            self.waiting_for = plain[0], head_bytes, plain[1]
        route, head_bytes, body_bytes = self.waiting_for
        if len(self.buffer) < head_bytes + body_bytes:  # its body is on its way
            now = self.loop.time()
            started = self._body_started = self._body_started or now
            received = len(self.buffer) - head_bytes
            self._due = self.uvicorn_class.pace.due(started, received, now)
            return
        self.waiting_for = None
        self._start(route, head_bytes, body_bytes)

    def _over_limit(self) -> bool:
        """Past uvicorn's `limit_concurrency`: its 503 is uvicorn's to send."""
        limit = self.config.limit_concurrency
        state = self.server_state
        return limit is not None and (len(state.connections) >= limit or len(state.tasks) >= limit)

    def _start(self, route: Route, head_bytes: int, body_bytes: int) -> None:
        size = head_bytes + body_bytes
        body = bytes(self.buffer[head_bytes:size])
        self.heads.body(body)
        read = self.heads.read
        self.busy, self._due, self._body_started = True, None, 0.0
        cycle = HitCycle(self, read.headers, body, size)
        task = self.loop.create_task(cycle.run(read.url.decode("latin-1"), route))
        task.add_done_callback(self.server_state.tasks.discard)
        self.server_state.tasks.add(task)

    def answered(self, size: int, keep_alive: bool) -> None:
        """The request of `size` bytes is answered: on to the next, or idle."""
        self.server_state.total_requests += 1
        del self.buffer[:size]
        self.busy = False
        transport = self.transport
        if transport is None:
            return
        if not keep_alive or self.stopping:
            transport.close()
            return
        if self.buffer:
            if not self.write_paused:  # else the next waits for the client to read this answer
                self._next()
        else:
            self._due = self.loop.time() + self.config.timeout_keep_alive
        if self.reading_paused:
            self._read_on()

    def _read_on(self) -> None:
        """Unless answers wait on the client, or whole requests here."""
        if self.write_paused or self.transport is None:
            return
        if self.busy and len(self.buffer) > HIGH_WATER_LIMIT:
            return
        self.reading_paused = False
        self.transport.resume_reading()

    def _hand_on(self) -> None:
        """Give the connection to uvicorn's protocol, from the first byte of this request on."""
        transport = self.transport
        if transport is None:
            return
        self.busy = True
        self._forget()
        protocol = self.make_uvicorn(_loop=self.loop)
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        if self.write_paused or self.reading_paused:  # reading is uvicorn's to pause from here on
            self.reading_paused = False
            transport.resume_reading()
        if self.write_paused:
            protocol.pause_writing()
        data, self.buffer = bytes(self.buffer), bytearray()
        if data:
            protocol.data_received(data)


class HitCycle(WholeWriter):
    """One invocation on a `HitSide`: the ASGI calls its endpoint makes, and its reply."""

    def __init__(self, side: HitSide, headers: dict[str, str], body: bytes, size: int) -> None:
        self.side, self.headers, self.body, self.size = side, headers, body, size
        self.started = False
        self.head: list[bytes] = []
        self.keep_alive = True

    async def run(self, path: str, route: Route) -> None:
        scope = {"type": "http", "method": "POST", "path": path, "query_string": b""}
        invocations = self.side.invocations
        assert invocations is not None  # a side without them hands on at once
        try:
            await invocations.routed(scope, self.receive, self.send, route, self.headers)
        finally:
            if not self.started:  # as uvicorn's cycle answers an app that sent nothing
                self.write_whole(500, INTERNAL_ERROR_HEADERS, b"Internal Server Error")
            self.side.answered(self.size, self.keep_alive)

    async def receive(self) -> dict[str, Any]:
        body, self.body = self.body, b""
        return {"type": "http.request", "body": body, "more_body": False}

    def write_whole(self, status: int, headers: Headers, body: bytes) -> None:
        """The endpoint's reply, head and body in one write."""
        head = self._head(status, headers)
        head += (b"\r\n", body)
        self._write(b"".join(head))

    async def send(self, message: Message) -> None:
        """ASGI's two sends, for the endpoint's error answers."""
        if message["type"] == "http.response.start":
            headers = [(name.lower(), value) for name, value in message.get("headers", ())]
            self.head = self._head(message["status"], headers)
            self.head.append(b"\r\n")
        elif message["type"] == "http.response.body":
            self.head.append(message.get("body", b""))
            self._write(b"".join(self.head))
            self.head = []

    def _head(self, status: int, headers: Headers) -> list[bytes]:
        """The status line and headers, as uvicorn's `send` writes them."""
        self.started = True  # as uvicorn's: a refused head has begun the answer
        if HEADER_VALUE_RE.search(b"\t".join(map(_value, headers))):
            self.keep_alive = False  # uvicorn closes the connection unanswered
            logger.error("ASGI callable returned without completing response.")  # its words
            raise RuntimeError("Invalid HTTP header value.")
        if b"connection" in map(_name, headers) and _closes(headers):
            self.keep_alive = False
        head = [STATUS_LINE[status]]
        lines = (*self.side.server_state.default_headers, *headers)
        if lines:  # each `name: value`, joined in C
            head += (b"\r\n".join(map(b": ".join, lines)), b"\r\n")
        if self.side.stopping and self.keep_alive:  # draining: this answer is the last
            self.keep_alive = False
            head.append(b"connection: close\r\n")
        return head

    def _write(self, data: bytes) -> None:
        transport = self.side.transport
        if data and transport is not None and not transport.is_closing():
            transport.write(data)


def _closes(headers: Headers) -> bool:
    """Whether a `connection` header says close, as uvicorn reads it."""
    tokens = [
        token.strip()
        for name, value in headers
        if name == b"connection"
        for token in value.lower().split(b",")
    ]
    return b"close" in tokens


def hits_first(uvicorn_class: type[HeaderDeadlineProtocol]) -> type[HitSide]:
    """The protocol class for uvicorn's `http=`: plain invocations here, the rest in
    `uvicorn_class`."""
    return type("HitSide", (HitSide,), {"uvicorn_class": uvicorn_class})
