"""uvicorn's httptools protocol with deadlines on each request's headers and body.

uvicorn times out a keep-alive connection between requests, but not one that has begun a request
and trickles its headers (or sends none at all after connecting), nor one whose body stops
arriving: a few thousand such connections (slowloris) hold as many file descriptors for ever.
Here every request must have sent all its headers within `header_timeout_s` of its first byte
(of the connection, for the first one), and its body may pause no longer than that between
chunks, or the connection is closed (by a sweep a few times per timeout: up to a quarter of it,
at most a second, late).

uvicorn writes a response's head and its body with a `write` each: two TCP segments, two
wake-ups of the client, and on loopback the kernel's whole receive path run twice in our
process. `HeadWithBody` holds the head until the body's first write (or the end of the event
loop's turn, for a response whose body comes later), so a response leaves in one `write`.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout_s: float = 10.0
    late: LateConnections | None = None  # one per server (per class: see head_limits)
    _due: float | None = None  # when this request's headers, or its body's next chunk, are late

    def connection_made(self, transport: Any) -> None:
        super().connection_made(cast(asyncio.Transport, HeadWithBody(transport, self.loop)))
        self._due_in_timeout()
        late = type(self).late = self.late or LateConnections(self.loop, self.header_timeout_s)
        late.watch(self)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._due_in_timeout()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._due_in_timeout()  # now for the body; its end clears it

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        if self._due is not None:
            self._due_in_timeout()

    def on_message_complete(self) -> None:
        self._due = None
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.late is not None:
            self.late.forget(self)
        super().connection_lost(exc)

    def _due_in_timeout(self) -> None:
        self._due = self.loop.time() + self.header_timeout_s

    def close_if_late(self, now: float) -> None:
        if self._due is not None and self._due <= now and not self.transport.is_closing():
            self._due = None
            self.transport.close()


class LateConnections:
    """Every connection of a server, looked at a few times per timeout: those whose request is
    late are closed. A float stored per request instead of a timer armed and cancelled three
    times (timer handles cost the invocation path more than the rest of this protocol)."""

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
    """A transport that sends a response's head with the first bytes after it, in one `write`."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self.transport = transport
        self.loop = loop
        self.head: bytes | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.transport, name)

    def write(self, data: bytes) -> None:
        if self.head is not None:
            head, self.head = self.head, None
            self.transport.write(head + data)
        elif _is_head(data):
            self.head = data  # the body's write, or the turn's end, sends it
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
    """A response's status line and headers, as uvicorn writes them: in one piece."""
    return isinstance(data, bytes) and data.startswith(b"HTTP/1.1 ") and data.endswith(b"\r\n\r\n")
