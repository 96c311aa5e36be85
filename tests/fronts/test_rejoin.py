"""A followed relay in uvloop: handed back once answered when the next request may be a hit, a
request begun meanwhile kept until then, and the main process's side reused by the next relay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvloop

from modelhost.fronts.rejoin import Followed

GET = b"GET /%d HTTP/1.1\r\nhost: x\r\n\r\n"
POST = b"POST /%d HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n"


async def upstream(asked: list[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
    """The main process: each request answered after a while, its number as the body."""
    asked.append(await reader.readuntil(b"\n"))  # the preamble
    try:
        while head := await reader.readuntil(b"\r\n\r\n"):
            asked.append(head)
            await asyncio.sleep(0.05)
            number = head.split(b" ")[1][1:]
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n%s" % number)
    except asyncio.IncompleteReadError:  # the client left
        writer.close()


async def relayed(tmp_path: Path) -> tuple[list[bytes], list[bytes], bytes]:
    """What the main process read, the bytes handed back each time, and the client's answers."""
    asked: list[bytes] = []
    path = str(tmp_path / "up.sock")
    main = await asyncio.start_unix_server(lambda r, w: upstream(asked, r, w), path)
    handed: list[bytes] = []
    connections: set[Followed] = set()

    def back(transport: asyncio.Transport, data: bytes) -> None:
        handed.append(data)  # relayed again, as the front does what it does not answer
        relay.take(data)
        transport.set_protocol(relay)
        relay.connection_made(transport)

    relay = Followed(1, path, connections, back)

    loop = asyncio.get_running_loop()
    front = await loop.create_server(lambda: relay, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*front.sockets[0].getsockname()[:2])
    answers = b""
    for first, then in ((POST % 1 + POST % 2, GET % 3), (POST % 4, POST % 5)):
        writer.write(first)
        await asyncio.sleep(0.02)  # on its way: the next waits for its answer
        writer.write(then)
        last = then.split(b" ")[1][1:]
        while not answers.endswith(last):
            answers += await asyncio.wait_for(reader.read(1000), 10)
    writer.close()
    await writer.wait_closed()
    while connections:  # the front's side closes once the client's has
        await asyncio.sleep(0.01)
    front.close()
    main.close()
    await asyncio.gather(front.wait_closed(), main.wait_closed())
    return asked, handed, answers


def test_only_a_request_that_may_be_a_hit_is_handed_back(tmp_path: Path) -> None:
    """Two requests, then a GET while they are due: it waits, then goes on to the main process.
    A POST once all is answered goes back; another sent while it is due waits, then goes back."""
    asked, handed, answers = uvloop.run(relayed(tmp_path))
    assert [a[:1] for a in answers.split(b"\r\n\r\n")[1:]] == [b"1", b"2", b"3", b"4", b"5"]
    assert handed == [POST % 4, POST % 5]
    assert asked[0].startswith(b"MHFRONT")  # one connection to the main process, reused
    assert asked[1:] == [POST % 1, POST % 2, GET % 3, POST % 4, POST % 5]
