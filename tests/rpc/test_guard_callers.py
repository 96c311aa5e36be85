"""The guard names each call's caller to the front in a header, over a Unix socket or a
loopback port, on either front, however the client's header block is framed and split."""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import hpack
import pytest
from hyperframe.frame import ContinuationFrame, DataFrame, Frame, HeadersFrame, SettingsFrame

from modelhost.rpc.access import by_guard
from modelhost.rpc.admission import ConnectionRate
from modelhost.rpc.frames import Limits, StreamBudget
from modelhost.rpc.fronts import GUARDED, NATIVE, new_server
from modelhost.rpc.guard import Admission, Guard
from modelhost.rpc.server import bind_all, listen

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
LIMITS = Limits(16, 16 * 2**10, 5.0, 32)
CALLER = "/t.Callers/Caller"


async def caller(request: bytes, context: grpc.aio.ServicerContext) -> bytes:
    return "|".join(by_guard(context)).encode()  # type: ignore[arg-type]


def block(stream_id: int, authority: str, padded: bool) -> list[bytes]:
    """A call's header block in a HEADERS frame, padded or not, and a CONTINUATION."""
    fields = [(":method", "POST"), (":scheme", "http"), (":path", CALLER)]
    fields += [(":authority", authority), ("content-type", "application/grpc")]
    encoded = hpack.Encoder().encode([*fields, ("te", "trailers")])
    padding = {"flags": ["PADDED"], "pad_length": 3} if padded else {}
    first = HeadersFrame(stream_id, data=encoded[:10], **padding)
    rest = ContinuationFrame(stream_id, data=encoded[10:], flags=["END_HEADERS"])
    message = DataFrame(stream_id, data=b"\0" * 5, flags=["END_STREAM"])
    return [first.serialize(), rest.serialize(), message.serialize()]


async def answer(reader: asyncio.StreamReader) -> bytes:
    """The first message the server sends."""
    while True:
        frame, length = Frame.parse_frame_header(memoryview(await reader.readexactly(9)))
        frame.parse_body(memoryview(await reader.readexactly(length)))
        if isinstance(frame, DataFrame) and frame.data:
            return bytes(frame.data[5:])


async def called(front: str, folder: Path | None, authority: str, step: int) -> str:
    """The caller a call through the guard was named as, its bytes sent `step` at a time."""
    server = new_server(front, [], ())
    handler = {"Caller": grpc.unary_unary_rpc_method_handler(caller)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Callers", handler),))
    server.add_registered_method_handlers("t.Callers", handler)  # type: ignore[attr-defined]
    sock = listen("127.0.0.1", 0)
    admission = Admission(8, ConnectionRate(1000, 8), StreamBudget(64))
    hop = bind_all([server], folder, sock.getsockname()[1])
    guard = Guard(sock, hop, limits=LIMITS, admission=admission)
    await server.start()
    await guard.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        data = (
            PREFACE + SettingsFrame(0).serialize() + b"".join(block(1, authority, front == NATIVE))
        )
        for at in range(0, len(data), step):
            writer.write(data[at : at + step])
            await writer.drain()
            await asyncio.sleep(0.001 if step < len(data) else 0)
        found = await asyncio.wait_for(answer(reader), 10)
        writer.close()
        return found.decode()
    finally:
        guard.close()
        guard.abort()
        await server.stop(0)


@pytest.mark.parametrize("front", GUARDED)
@pytest.mark.parametrize("unix", [True, False])
@pytest.mark.parametrize("step", [1, 7, 4096])
def test_the_front_is_told_the_caller_and_its_foreign_authority(
    front: str, unix: bool, step: int, tmp_path: Path
) -> None:
    found = asyncio.run(called(front, tmp_path if unix else None, "models.example.com", step))
    assert found == "127.0.0.1|models.example.com"


@pytest.mark.parametrize("front", GUARDED)
def test_a_caller_naming_this_machine_has_no_foreign_authority(front: str, tmp_path: Path) -> None:
    assert asyncio.run(called(front, tmp_path, "localhost:8001", 4096)) == "127.0.0.1|"
