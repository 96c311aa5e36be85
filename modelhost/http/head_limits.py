"""Caps on a request's head, applied to the bytes as they arrive, before the parser takes them in.

uvicorn's httptools protocol puts no bound on a head, so one endless URL or header stalls
every client (docs/security.md). Past a cap the connection gets 414 or 431 and is closed.
"""

from __future__ import annotations

import json
from typing import Any

from modelhost.http.client_pace import ClientPace
from modelhost.http.protocol import HeaderDeadlineProtocol

MAX_REQUEST_LINE_BYTES = 16 * 1024
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADER_LINES = 128  # the request line included
END_OF_HEAD = b"\r\n\r\n"
REASONS = {414: b"URI Too Long", 431: b"Request Header Fields Too Large"}


class HeadLimitedProtocol(HeaderDeadlineProtocol):
    """The deadline protocol, refusing heads past the caps.

    Bytes count from the previous request's end, so a body in the head's packet is not counted.
    """

    _in_head = True
    _head_bytes = 0
    _head_lines = 0
    _line_bytes = 0  # of its request line
    _tail = b""  # the head's end may straddle two chunks

    def data_received(self, data: bytes) -> None:
        if self._in_head and self._refused(data):
            return
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        # a pipelined head already parsed ends at once
        self._in_head, self._tail = True, b""
        self._head_bytes = self._head_lines = self._line_bytes = 0

    def _refused(self, data: bytes) -> bool:
        """Count the head's part of `data`; answer and close if it passes a cap."""
        part = self._head_part(data)
        if self._head_lines == 0:  # still in the request line
            line_end = data.find(b"\n", 0, part)
            self._line_bytes += part if line_end < 0 else line_end
        self._head_lines += data.count(b"\n", 0, part)
        self._head_bytes += part
        self._tail = data[-3:]
        status = self._status_past_caps()
        if status:
            self._refuse(status)
        return bool(status)

    def _head_part(self, data: bytes) -> int:
        end = data.find(END_OF_HEAD)
        if end < 0 and self._tail:
            end = (self._tail + data[:3]).find(END_OF_HEAD)
            end = -1 if end < 0 else max(0, end - len(self._tail) + len(END_OF_HEAD))
        return len(data) if end < 0 else end

    def _status_past_caps(self) -> int:
        if self._line_bytes > MAX_REQUEST_LINE_BYTES:
            return 414
        if self._head_bytes > MAX_HEAD_BYTES or self._head_lines > MAX_HEADER_LINES:
            return 431
        return 0

    def _refuse(self, status: int) -> None:
        message = refusal_message(status)
        # before any route: readable as every protocol's error, OIP's `error` too
        refusal = {"code": status, "type": "RequestHeadTooLarge", "message": message}
        body = json.dumps({**refusal, "error": message})
        head = [
            b"HTTP/1.1 %d %s" % (status, REASONS[status]),
            b"content-type: application/json",
            b"content-length: %d" % len(body),
            b"connection: close",
        ]
        self.transport.write(b"\r\n".join(head) + END_OF_HEAD + body.encode())
        self.transport.close()
        self._in_head = False


def refusal_message(status: int) -> str:
    if status == 414:
        return (
            f"a request line is at most {MAX_REQUEST_LINE_BYTES} bytes: send the data in the "
            "body, not the URL"
        )
    return (
        f"a request's headers are at most {MAX_HEAD_BYTES} bytes and {MAX_HEADER_LINES} lines: "
        "send fewer or shorter headers"
    )


def head_limited_protocol(pace: ClientPace) -> type[HeadLimitedProtocol]:
    """The protocol class for uvicorn's `http=`, one per server so each sweeps its own."""
    attributes: dict[str, Any] = {"pace": pace}
    return type("HeadLimitedProtocol", (HeadLimitedProtocol,), attributes)
