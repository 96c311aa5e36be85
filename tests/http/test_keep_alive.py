"""An idle keep-alive connection is closed after uvicorn's keep-alive timeout, by the deadline
sweep rather than a timer armed per response; a client that sends again keeps it."""

from __future__ import annotations

import asyncio

from helpers.transport import Transport
from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.server import ServerState

from modelhost.http.client_pace import ClientPace
from modelhost.http.head_limits import head_limited_protocol

REQUEST = b"POST /x HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"
KEEP_ALIVE_S = 1  # uvicorn's setting is whole seconds
HEADER_TIMEOUT_S = 2.0  # swept every half second, at most


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    await receive()
    headers = [(b"content-length", b"2")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


def connection(steps: list[tuple[float, bytes]]) -> tuple[Transport, list[bool]]:
    """Each step: wait so long, then send those bytes (b"": none); closed or not after each."""
    transport, closed = Transport(), []

    async def run() -> None:
        config = Config(app, lifespan="off", access_log=False, timeout_keep_alive=KEEP_ALIVE_S)
        config.load()
        protocol = head_limited_protocol(ClientPace(HEADER_TIMEOUT_S, 0))(config, ServerState(), {})
        protocol.connection_made(transport)
        for wait_s, data in steps:
            await asyncio.sleep(wait_s)
            if data:
                protocol.data_received(data)
            closed.append(transport.closed)
            assert protocol.timeout_keep_alive_task is None  # no timer per response
        protocol.connection_lost(None)

    asyncio.run(run())
    return transport, closed


def test_idle_connection_closes_after_the_keep_alive_timeout() -> None:
    transport, closed = connection([(0.0, REQUEST), (0.5, b""), (KEEP_ALIVE_S + 0.5 + 0.1, b"")])
    assert transport.written.count(b"200 OK") == 1
    assert closed == [False, False, True]


def test_a_new_request_keeps_the_connection() -> None:
    """Requests closer together than the timeout, then a pause shorter than the header timeout
    while a head trickles in, keep the connection open."""
    steps = [(0.0, REQUEST), (0.6, REQUEST), (0.6, REQUEST[:10]), (1.2, b"")]
    transport, closed = connection(steps)
    assert transport.written.count(b"200 OK") == 2
    assert closed == [False, False, False, False]
