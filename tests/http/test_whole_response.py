"""A reply written whole leaves the same bytes, and the connection in the same state, as
uvicorn's two sends; whatever is unusual takes the two sends."""

from __future__ import annotations

import asyncio
from typing import Any

from helpers.transport import Transport
from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.server import ServerState

from modelhost.http.client_pace import ClientPace
from modelhost.http.head_limits import head_limited_protocol
from modelhost.http.whole_response import send_whole

HEADERS = [(b"content-type", b"application/json"), (b"content-length", b"2")]
REQUEST = b"POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"


async def whole(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    await send_whole(send, 200, scope["state"].get("headers", HEADERS), b"{}")


async def in_two(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    headers = scope["state"].get("headers", HEADERS)
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


def served(app: Any, data: bytes, headers: list[tuple[bytes, bytes]] | None = None) -> Transport:
    """`data` fed to modelhost's uvicorn protocol running `app`; the connection after."""
    transport = Transport()

    async def run() -> None:
        config = Config(app, lifespan="off", access_log=False, log_level="error")
        config.load()
        state = ServerState()
        state.default_headers = [(b"date", b"Sun, 29 Nov 2026 04:00:00 GMT"), (b"server", b"x")]
        app_state = {} if headers is None else {"headers": headers}
        protocol = head_limited_protocol(ClientPace(10.0, 0))(config, state, app_state)
        protocol.connection_made(transport)
        protocol.data_received(data)
        for _ in range(20):  # each request's task, and the pipelined one after it
            await asyncio.sleep(0)
        transport.closed_while_open = transport.closed
        protocol.connection_lost(None)

    asyncio.run(run())
    return transport


def test_whole_reply_is_what_two_sends_write() -> None:
    assert served(whole, REQUEST).written == served(in_two, REQUEST).written
    assert served(whole, REQUEST).written.endswith(b"content-length: 2\r\n\r\n{}")


def test_pipelined_requests_are_answered_in_turn() -> None:
    """The cycle is left complete, so the next request on the connection starts."""
    answers = served(whole, REQUEST * 3)
    assert answers.written == served(in_two, REQUEST * 3).written
    assert answers.written.count(b"HTTP/1.1 200 OK") == 3
    assert not answers.closed_while_open


def test_connection_close_takes_the_two_sends() -> None:
    closing = REQUEST.replace(b"host: a\r\n", b"host: a\r\nconnection: close\r\n")
    answer = served(whole, closing)
    assert answer.written == served(in_two, closing).written
    assert b"connection: close" in answer.written and answer.closed_while_open


def test_a_bad_header_value_is_refused_as_uvicorn_refuses_it() -> None:
    """A value with a line break (a handler's content type, say) never reaches the wire."""
    bad = [(b"content-type", b"text/plain\r\nx-injected: 1"), (b"content-length", b"2")]
    answer = served(whole, REQUEST, bad)
    assert answer.written == served(in_two, REQUEST, bad).written
    assert b"x-injected" not in answer.written and answer.closed_while_open
