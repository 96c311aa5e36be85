"""A connection's plain invocations are answered before uvicorn, byte for byte as uvicorn's cycle
answers them; the first other request hands the connection, from its bytes on, to uvicorn."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from helpers.transport import Transport
from starlette.types import Receive, Scope, Send
from uvicorn.config import Config
from uvicorn.server import ServerState

from modelhost.errors import ModelNotFound
from modelhost.host import Invocation, Result
from modelhost.http.client_pace import ClientPace
from modelhost.http.head_limits import head_limited_protocol
from modelhost.http.hits import HitSide, hits_first
from modelhost.http.invocations import InvocationFastPath, Invocations
from modelhost.protocols.tenants import FromHeader

HIT = b"POST /models/m/invoke HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"
SAGEMAKER = (
    b"POST /invocations HTTP/1.1\r\nhost: a\r\nx-modelhost-tenant: t7\r\n"
    b"x-amzn-sagemaker-target-model: m\r\ncontent-length: 2\r\n\r\n{}"
)
PING = b"GET /ping HTTP/1.1\r\nhost: a\r\n\r\n"
REQUEST_ID = re.compile(rb"x-request-id: [0-9a-f-]{36}")  # fresh on each answer
MISSING = b"POST /models/gone/invoke HTTP/1.1\r\nhost: a\r\ncontent-length: 2\r\n\r\n{}"
UNNAMED = (  # no model named: a 400, with custom attributes read first
    b"POST /invocations HTTP/1.1\r\nhost: a\r\nx-amzn-sagemaker-custom-attributes: k=v\r\n"
    b"content-length: 2\r\n\r\n{}"
)


class Host:
    """Answers with the model's name; a model named `gone` is not found, `slow` takes a while,
    and `crlf` answers a content type no header may carry."""

    def sole_startup_model(self) -> str:
        return ""  # none: an unnamed call is 400

    async def invoke(self, name: str, invocation: Invocation) -> Result:
        if name == "slow":
            await asyncio.sleep(0.05)
        if name == "gone":
            raise ModelNotFound("model gone is not in the store")
        timings = {"queue": 0.5, "download": 0.0, "load": 0.0, "infer": 1.0}
        content_type = "text/plain\r\nx-injected: 1" if name == "crlf" else "text/plain"
        return Result(name.encode(), content_type, "hit", timings, "host")


async def framework(scope: Scope, receive: Receive, send: Send) -> None:
    headers = [(b"content-length", b"4")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"pong"})


class Connection(Transport):
    """A transport that follows the protocol it is handed to."""

    def __init__(self) -> None:
        super().__init__()
        self.protocol: Any = None
        self.reading = True

    def set_protocol(self, protocol: Any) -> None:
        self.protocol = protocol

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True


def written(
    data: list[bytes],
    hits: bool = True,
    idle_s: float = 0.0,
    drain: bool = False,
    unread: bool = False,
    reads_at_last: bool = False,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    default_headers: tuple[tuple[bytes, bytes], ...] = ((b"server", b"modelhost"),),
) -> tuple[bytes, Connection]:
    """What a connection sent `data`, chunk by chunk, then idle for `idle_s`, is answered, on
    one or the other way; `drain`: the server drains once the data is sent; `unread`: the
    client reads no answers (the transport's buffer is full from the start), until the data is
    sent if `reads_at_last`; `headers`: the
    operator's, on every answer; `default_headers`: uvicorn's (server and date)."""
    connection = Connection()

    async def run() -> None:
        tenants = FromHeader("x-modelhost-tenant")
        invocations = Invocations(Host(), 1024, "", headers=headers, tenants=tenants)  # type: ignore[arg-type]
        config = Config(
            InvocationFastPath(framework, invocations),
            lifespan="off",
            access_log=False,
            proxy_headers=False,
            timeout_keep_alive=1,
        )
        config.load()
        state = ServerState()
        state.default_headers = list(default_headers)
        uvicorn_class = head_limited_protocol(ClientPace(2.0, 0))  # swept every half second
        protocol = (hits_first(uvicorn_class) if hits else uvicorn_class)(config, state, {})
        connection.protocol = protocol
        protocol.connection_made(connection)
        if unread:
            protocol.pause_writing()
        for chunk in data:
            connection.protocol.data_received(chunk)
            await asyncio.sleep(0.01)
        if reads_at_last:
            connection.protocol.resume_writing()
            await asyncio.sleep(0.01)
        if drain:
            connection.protocol.shutdown()
        await asyncio.sleep(idle_s)
        connection.protocol.connection_lost(None)

    asyncio.run(run())
    return REQUEST_ID.sub(b"x-request-id: -", connection.written), connection


def test_invocations_are_answered_as_uvicorn_answers_them() -> None:
    data = [HIT, SAGEMAKER, MISSING, UNNAMED, HIT[:-1], HIT[-1:]]  # a body in two chunks
    answered, connection = written(data)
    assert answered == written(data, hits=False)[0]
    assert answered.count(b"HTTP/1.1 200 OK") == 3
    assert b"x-modelhost-tenant: t7" in answered and b"HTTP/1.1 404" in answered
    assert b"HTTP/1.1 400" in answered
    assert isinstance(connection.protocol, HitSide)  # no request was handed on


def test_the_first_other_request_hands_the_connection_on() -> None:
    """A ping after a hit, with a hit pipelined behind it in the same bytes: uvicorn answers
    both, in order."""
    data = [HIT, PING + HIT]
    answered, connection = written(data)
    assert answered == written(data, hits=False)[0]
    assert [answered.find(b"m"), answered.find(b"pong")] < [answered.find(b"pong"), len(answered)]
    assert answered.count(b"HTTP/1.1 200 OK") == 3
    assert not isinstance(connection.protocol, HitSide)


def test_a_head_cut_short_goes_to_uvicorn_whole() -> None:
    answered, connection = written([HIT[:10], HIT[10:]])
    assert answered == written([HIT], hits=False)[0]
    assert not isinstance(connection.protocol, HitSide)


def test_an_idle_connection_closes_after_the_keep_alive_timeout() -> None:
    assert not written([HIT], idle_s=0.6)[1].closed
    answered, connection = written([HIT], idle_s=1.7)
    assert connection.closed and answered.count(b"HTTP/1.1 200 OK") == 1
    assert isinstance(connection.protocol, HitSide)


def test_a_draining_server_answers_the_request_under_way_then_closes() -> None:
    slow = HIT.replace(b"/models/m/", b"/models/slow/")
    answered, connection = written([HIT, slow], idle_s=0.2, drain=True)
    assert answered == written([HIT, slow], hits=False, idle_s=0.2, drain=True)[0]
    assert answered.count(b"HTTP/1.1 200 OK") == 2 and connection.closed
    assert isinstance(connection.protocol, HitSide)


def test_a_connection_handed_on_unread_is_uvicorns_to_pause() -> None:
    """Reading paused while the client read nothing is resumed as uvicorn takes over, so that
    its own flow control, which pauses only writes, does not leave the connection stalled."""
    answered, connection = written([PING], unread=True)
    assert connection.reading and not isinstance(connection.protocol, HitSide)
    assert b"pong" not in answered  # uvicorn waits for the client to read


def test_a_reply_no_header_may_carry_closes_the_connection_unanswered() -> None:
    """As uvicorn does: its `send` refuses the head, and the app cannot answer again."""
    crlf = HIT.replace(b"/models/m/", b"/models/crlf/")
    answered, connection = written([HIT, crlf, HIT])
    assert answered == written([HIT, crlf, HIT], hits=False)[0]
    assert answered.count(b"HTTP/1.1") == 1 and b"injected" not in answered
    assert connection.closed


def test_an_operators_connection_close_header_closes_after_the_answer() -> None:
    for value, closes in ((b"keep-alive, Close", True), (b"closed", False)):
        answered, connection = written([HIT], headers=((b"connection", value),))
        assert answered == written([HIT], hits=False, headers=((b"connection", value),))[0]
        assert connection.closed is closes


def test_answers_without_uvicorns_default_headers_are_uvicorns() -> None:
    answered = written([HIT, MISSING], default_headers=())[0]
    assert answered == written([HIT, MISSING], hits=False, default_headers=())[0]
    assert answered.startswith(b"HTTP/1.1 200 OK\r\ncontent-type:")


def test_pipelined_hits_wait_while_the_client_reads_no_answers() -> None:
    """With the client reading nothing, the next hit in the bytes waits for it: answers do not
    pile up in the server, a model's large ones each held until read."""
    answers, connection = written([HIT * 3], unread=True)
    assert answers.count(b"HTTP/1.1 200 OK") == 1
    assert not connection.reading
    answers, connection = written([HIT * 3], unread=True, reads_at_last=True)
    assert answers.count(b"HTTP/1.1 200 OK") == 3
    assert connection.reading
