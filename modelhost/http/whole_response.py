"""An invocation's reply written whole, past uvicorn's two ASGI sends, whose header checks cost
more than the rest of a small reply; any cycle but uvicorn's plain one takes the two sends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.types import Send
from uvicorn.protocols.http.httptools_impl import (
    HEADER_VALUE_RE,
    STATUS_LINE,
    RequestResponseCycle,
)

Headers = Sequence[tuple[bytes, bytes]]


class WholeWriter:
    """A cycle of our own that writes a reply whole (http/hits.py)."""

    def write_whole(self, status: int, headers: Headers, body: bytes) -> None:
        raise NotImplementedError


async def send_whole(send: Send, status: int, headers: Headers, body: bytes) -> None:
    """Answer `status` with `headers` (content-length among them) and `body`."""
    writer = getattr(send, "__self__", None)
    if isinstance(writer, WholeWriter):
        writer.write_whole(status, headers, body)
        return
    cycle = _plain_cycle(send)
    if cycle is None or HEADER_VALUE_RE.search(b"\t".join([value for _, value in headers])):
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    head = [STATUS_LINE[status]]
    for name, value in (*cycle.default_headers, *headers):
        head += (name, b": ", value, b"\r\n")
    head += (b"\r\n", body)
    cycle.response_started = cycle.response_complete = True
    cycle.waiting_for_100_continue = False
    cycle.transport.write(b"".join(head))
    cycle.message_event.set()  # a receive() still waiting hears of the end
    cycle.on_response()


def _plain_cycle(send: Send) -> Any:
    """uvicorn's cycle behind `send`, when nothing asks for its own path: else None."""
    cycle = getattr(send, "__self__", None)
    if type(cycle) is not RequestResponseCycle:
        return None
    try:
        if not cycle.keep_alive or cycle.access_log or cycle.response_started:
            return None
        if cycle.disconnected or cycle.flow.write_paused or cycle.scope["method"] == "HEAD":
            return None
    except AttributeError:  # a uvicorn whose cycle holds its state otherwise
        return None
    return cycle
