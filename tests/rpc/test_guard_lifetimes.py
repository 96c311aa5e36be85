"""The guard ends a gRPC connection that is idle or old, as grpc core would, on either front
(pygrpc-native holds neither limit): GOAWAY with NO_ERROR, and the calls under way at its age
get the grace before the connection closes. A real guard and front on loopback, short limits."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Callable

import hpack
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from hyperframe.frame import DataFrame, Frame, GoAwayFrame, HeadersFrame, SettingsFrame

from modelhost.rpc.admission import ConnectionRate
from modelhost.rpc.frames import NO_ERROR, Limits, StreamBudget, goaway
from modelhost.rpc.fronts import GUARDED, new_server
from modelhost.rpc.guard import BACKEND_HOST, Admission, Guard, Hop, Relay
from modelhost.rpc.server import listen

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
WATCH = "/grpc.health.v1.Health/Watch"
LIMITS = Limits(16, 16 * 2**10, 0.4, 32, idle_s=0.2, age_s=2.0, age_grace_s=1.0)
WAIT_S = 20.0  # far past every limit: only a guard that never ends the connection waits so long

Guarded = Callable[[], AsyncIterator[int]]


async def guarded_front(front: str) -> tuple[Guard, object]:
    server = new_server(front, [], ())
    servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    backend_port = server.add_insecure_port(f"{BACKEND_HOST}:0")
    await server.start()
    await servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    admission = Admission(8, ConnectionRate(1000, 8), StreamBudget(64))
    guard = Guard(
        listen("127.0.0.1", 0), Hop(port=backend_port), limits=LIMITS, admission=admission
    )
    await guard.start()
    return guard, server


async def frames_until_closed(reader: asyncio.StreamReader) -> list[Frame]:
    """Every frame the guard sends until it closes the connection."""
    found: list[Frame] = []
    while head := await reader.read(9):
        head += await reader.readexactly(9 - len(head))
        frame, length = Frame.parse_frame_header(memoryview(head))
        frame.parse_body(memoryview(await reader.readexactly(length)))
        found.append(frame)
    return found


async def connected(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(PREFACE + SettingsFrame(0).serialize())
    return reader, writer


def watch_call(port: int) -> bytes:
    """A Health/Watch call, whose stream stays open while the server watches."""
    fields = [(":method", "POST"), (":scheme", "http"), (":path", WATCH)]
    fields += [(":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc")]
    headers = HeadersFrame(1, data=hpack.Encoder().encode([*fields, ("te", "trailers")]))
    headers.flags.add("END_HEADERS")
    message = DataFrame(1, data=b"\x00\x00\x00\x00\x00")  # an empty HealthCheckRequest
    message.flags.add("END_STREAM")
    return headers.serialize() + message.serialize()


async def ending(front: str, call: bool) -> list[Frame]:
    """The frames a connection gets until the guard ends it, with a Watch open or none."""
    guard, server = await guarded_front(front)
    port = guard.sock.getsockname()[1]
    try:
        reader, writer = await connected(port)
        if call:
            writer.write(watch_call(port))
        found = await asyncio.wait_for(frames_until_closed(reader), WAIT_S)
        writer.close()
        return found
    finally:
        guard.close()
        guard.abort()
        await server.stop(0)  # type: ignore[attr-defined]


def goaways(found: list[Frame]) -> list[GoAwayFrame]:
    return [frame for frame in found if isinstance(frame, GoAwayFrame)]


@pytest.mark.parametrize("front", GUARDED)
def test_an_idle_connection_is_told_to_go_and_closed(front: str) -> None:
    found = asyncio.run(ending(front, call=False))
    assert [(g.error_code, g.additional_data) for g in goaways(found)] == [(0, b"idle")]


@pytest.mark.parametrize("front", GUARDED)
def test_an_old_connection_is_told_to_go_and_its_call_has_the_grace(front: str) -> None:
    """The Watch is answered, GOAWAY comes at the connection's age with the call still open,
    and the connection closes once the grace is over. The first GOAWAY names every stream, as
    the guard serves the calls crossing it; the last, the call that was served."""
    found = asyncio.run(ending(front, call=True))
    told = found.index(goaways(found)[0])
    assert any(isinstance(frame, DataFrame) and frame.stream_id == 1 for frame in found[:told])
    assert all(goaway.error_code == 0 for goaway in goaways(found))
    assert goaways(found)[0].additional_data == b"max connection age"
    assert [goaway.last_stream_id for goaway in goaways(found)] == [2**31 - 1, 1]


def test_what_grpc_sends_after_the_goodbye_is_dropped() -> None:
    """The backend's bytes read in the same turn as the GOAWAY's end (seen under a stream
    flood): written after the client's EOF, they raised and printed a traceback."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        admission = Admission(8, ConnectionRate(1000, 8), StreamBudget(64))
        guard = Guard(listen("127.0.0.1", 0), Hop(port=1), limits=LIMITS, admission=admission)
        relay = Relay(guard)
        ends = [socket.socketpair() for _ in range(2)]
        relay.client, _ = await loop.create_connection(asyncio.Protocol, sock=ends[0][0])
        relay.backend, _ = await loop.create_connection(asyncio.Protocol, sock=ends[1][0])
        relay.end_with(goaway(0, NO_ERROR, "refused"))  # between frames: the goodbye now
        relay.from_backend(DataFrame(1, data=b"late").serialize())
        relay.end()
        for pair in ends:
            pair[1].close()
        guard.sock.close()

    asyncio.run(run())
