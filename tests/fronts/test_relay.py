"""A front's relay in uvloop, as the fronts run it: a client's bytes reach the upstream after a
preamble that names the client, and the upstream's answer comes back."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import uvloop

from modelhost.fronts.preamble import decode
from modelhost.fronts.relay import ClientSide, client_factory


async def relay_once(tmp_path: Path, request: bytes, half_close: bool) -> tuple[bytes, bytes]:
    """What the upstream read, and what the client read back."""
    received: list[bytes] = []

    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        received.append(await reader.readuntil(b"\n") + await reader.readexactly(len(request)))
        writer.write(b"answer")
        writer.close()

    path = str(tmp_path / "up.sock")
    server = await asyncio.start_unix_server(upstream, path)
    connections: set[ClientSide] = set()
    loop = asyncio.get_running_loop()
    front = await loop.create_server(client_factory(3, path, connections), "127.0.0.1", 0)
    port = front.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)  # at once: before the front's upstream side is open
    if half_close:
        writer.write_eof()
    answer = await asyncio.wait_for(reader.read(), 10)
    writer.close()
    await writer.wait_closed()
    await asyncio.wait_for(closed(connections), 10)
    front.close()
    server.close()
    await asyncio.gather(front.wait_closed(), server.wait_closed())
    return received[0], answer


async def closed(connections: set[ClientSide]) -> None:
    while connections:  # the front's side closes once the client's has
        await asyncio.sleep(0.01)


def test_the_bytes_cross_both_ways_after_the_preamble(tmp_path: Path) -> None:
    read, answer = uvloop.run(relay_once(tmp_path, b"GET /ping HTTP/1.1\r\n\r\n", False))
    line, _, rest = read.partition(b"\n")
    preamble = decode(line)
    assert preamble.front == 3 and preamble.client.host == "127.0.0.1"
    assert rest == b"GET /ping HTTP/1.1\r\n\r\n" and answer == b"answer"


def test_a_client_that_half_closes_at_once_is_still_answered(tmp_path: Path) -> None:
    _, answer = uvloop.run(relay_once(tmp_path, b"x" * 100, True))
    assert answer == b"answer"


def test_a_gone_upstream_closes_the_client(tmp_path: Path) -> None:
    async def run() -> bytes:
        loop = asyncio.get_running_loop()
        missing = str(tmp_path / "none.sock")
        front = await loop.create_server(client_factory(1, missing, set()), "127.0.0.1", 0)
        with socket.create_connection(front.sockets[0].getsockname()[:2]) as sock:
            sock.setblocking(False)
            data = await asyncio.wait_for(loop.sock_recv(sock, 10), 10)
        front.close()
        await front.wait_closed()
        await asyncio.sleep(0.05)  # the front's side of the refused connection closes
        return data

    assert uvloop.run(run()) == b""
