"""uvicorn's httptools protocol with deadlines on each request's headers and body.

uvicorn does not time out a request that trickles its headers or body (slowloris). Here the
headers must arrive within the timeout, the body keep its pace, and the client read its
answers (client_pace.py); one sweep also keeps the keep-alive timeout. `HeadWithBody` writes a
response's head and body at once, sparing the client a wake-up.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from modelhost.http.client_pace import ClientPace


class HeaderDeadlineProtocol(HttpToolsProtocol):
    pace = ClientPace(10.0, 0)  # one per server (per class: see head_limits)
    late: LateConnections | None = None
    _due: float | None = None  # when the headers, or the body's next chunk, are late
    _body_started = 0.0
    _body_bytes = 0
    _idle = False  # `_due` is the keep-alive's: any bytes from the client lift it
    _write_due: float | None = None  # unread answers: cut off then

    def connection_made(self, transport: Any) -> None:
        super().connection_made(cast(asyncio.Transport, HeadWithBody(transport, self.loop)))
        self._due_in_timeout()
        late = type(self).late = self.late or LateConnections(self.loop, self.pace.timeout_s)
        late.watch(self)

    def data_received(self, data: bytes) -> None:
        if self._idle:  # as uvicorn's keep-alive timer is cancelled by any data
            self._idle, self._due = False, None
        super().data_received(data)

    def on_response_complete(self) -> None:
        """uvicorn's, the keep-alive deadline swept, not a timer per response; reading resumed
        only once no request read waits (uvicorn reads on, piling up a pipelining client's)."""
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        if self.pipeline:  # a pipelined request waits: it starts now
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        elif self._due is None:  # no next request begun: idle until the keep-alive timeout
            self._idle, self._due = True, self.loop.time() + self.timeout_keep_alive
        if not self.pipeline:
            self.flow.resume_reading()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._due_in_timeout()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._body_begins(self.loop.time())  # its end clears the deadline

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        if self._due is not None:
            self._body_bytes += len(body)
            self._due = self.pace.due(self._body_started, self._body_bytes, self.loop.time())

    def on_message_complete(self) -> None:
        self._due = None
        super().on_message_complete()

    def pause_writing(self) -> None:
        super().pause_writing()
        self._write_due = self.loop.time() + self.pace.send_timeout_s

    def resume_writing(self) -> None:
        super().resume_writing()
        self._write_due = None

    def connection_lost(self, exc: Exception | None) -> None:
        if self.late is not None:
            self.late.forget(self)
        super().connection_lost(exc)

    def _body_begins(self, now: float) -> None:
        self._body_started, self._body_bytes = now, 0
        self._due = now + self.pace.timeout_s

    def _due_in_timeout(self) -> None:
        self._due = self.loop.time() + self.pace.timeout_s

    def close_if_late(self, now: float) -> None:
        if self._write_due is not None and self._write_due <= now:
            self._write_due = None
            self.transport.abort()  # close() would wait for the unread answers
        elif self._due is not None and self._due <= now and not self.transport.is_closing():
            if self.flow.read_paused:  # held back by us: it starts anew
                self._body_begins(now)
                return
            self._idle, self._due = False, None
            self.transport.close()


class LateConnections:
    """Every connection of a server, swept a few times per timeout for late ones.

    A due time per request, not a timer: timer handles cost more than the rest of the protocol.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.loop = loop
        self.every_s = min(1.0, timeout_s / 4)  # closed at most this long after its due time
        self.connections: set[HeaderDeadlineProtocol] = set()
        self._timer: asyncio.TimerHandle | None = None

    def watch(self, connection: HeaderDeadlineProtocol) -> None:
        self.connections.add(connection)
        if self._timer is None:
            self._timer = self.loop.call_later(self.every_s, self.sweep)

    def forget(self, connection: HeaderDeadlineProtocol) -> None:
        self.connections.discard(connection)

    def sweep(self) -> None:
        self._timer = None
        now = self.loop.time()
        for connection in list(self.connections):
            connection.close_if_late(now)
        if self.connections:
            self._timer = self.loop.call_later(self.every_s, self.sweep)


class HeadWithBody:
    """A transport that sends a response's head with the first bytes after it."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.head: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)

    def write(self, data: bytes) -> None:
        if self.transport.is_closing():  # uvloop raises before connection_lost
            self.head = None
        elif self.head is not None:
            head, self.head = self.head, None
            self.transport.write(head + data)
        elif _is_head(data):
            self.head = data  # the body's write, or the loop turn's end, sends it
            self.loop.call_soon(self.flush)
        else:
            self.transport.write(data)

    def flush(self) -> None:
        if self.head is not None:
            head, self.head = self.head, None
            if not self.transport.is_closing():
                self.transport.write(head)

    def is_closing(self) -> bool:  # asked on every request: not through __getattr__
        return self.transport.is_closing()

    def close(self) -> None:
        self.flush()
        self.transport.close()


def _is_head(data: bytes) -> bool:
    """A response's status line and headers, which uvicorn writes in one piece."""
    return isinstance(data, bytes) and data.startswith(b"HTTP/1.1 ") and data.endswith(b"\r\n\r\n")
