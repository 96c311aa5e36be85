"""uvicorn's httptools protocol with deadlines on each request's headers and body.

uvicorn times out a keep-alive connection between requests, but not one that has begun a request
and trickles its headers (or sends none at all after connecting), nor one whose body stops
arriving: a few thousand such connections (slowloris) hold as many file descriptors for ever.
Here every request must have sent all its headers within `header_timeout_s` of its first byte
(of the connection, for the first one), and its body may pause no longer than that between
chunks, or the connection is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


class HeaderDeadlineProtocol(HttpToolsProtocol):
    header_timeout_s: float = 10.0
    _header_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: Any) -> None:
        super().connection_made(transport)
        self._arm_header_timer()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._arm_header_timer()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        self._arm_header_timer()  # now for the body; its end cancels it

    def on_body(self, body: bytes) -> None:
        super().on_body(body)
        if self._header_timer is not None:
            self._arm_header_timer()

    def on_message_complete(self) -> None:
        self._cancel_header_timer()
        super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_header_timer()
        super().connection_lost(exc)

    def _arm_header_timer(self) -> None:
        self._cancel_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout_s, self._headers_too_slow)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if not self.transport.is_closing():
            self.transport.close()


def header_deadline_protocol(header_timeout_s: float) -> type[HeaderDeadlineProtocol]:
    """The protocol class for uvicorn's `http=`, with this deadline."""
    return type(
        "HeaderDeadlineProtocol", (HeaderDeadlineProtocol,), {"header_timeout_s": header_timeout_s}
    )
