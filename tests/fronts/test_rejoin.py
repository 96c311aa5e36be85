"""A followed relay in uvloop: handed back once answered, a request begun meanwhile kept for the
front, and the main process's side reused by the next relay."""

from __future__ import annotations

import asyncio
from pathlib import Path

import uvloop

from modelhost.fronts.rejoin import Followed, Upstream

GET = b"GET /%d HTTP/1.1\r\nhost: x\r\n\r\n"


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

    def back(transport: asyncio.Transport, data: bytes, parked: Upstream) -> None:
        handed.append(data)  # relayed again, as the front does what it does not answer
        again = Followed(1, path, connections, back, parked)
        again.take(data)
        transport.set_protocol(again)
        again.connection_made(transport)

    def first() -> Followed:
        return Followed(1, path, connections, back, None)

    loop = asyncio.get_running_loop()
    front = await loop.create_server(first, "127.0.0.1", 0)
    reader, writer = await asyncio.open_connection(*front.sockets[0].getsockname()[:2])
    writer.write(GET % 1 + GET % 2)
    await asyncio.sleep(0.02)  # both on their way: the next waits for their answers
    writer.write(GET % 3)
    answers = b""
    while answers.count(b"HTTP/1.1") < 3 or not answers.endswith(b"3"):
        answers += await asyncio.wait_for(reader.read(1000), 10)
    writer.close()
    await writer.wait_closed()
    while connections:  # the front's side closes once the client's has
        await asyncio.sleep(0.01)
    front.close()
    main.close()
    await asyncio.gather(front.wait_closed(), main.wait_closed())
    return asked, handed, answers


def test_a_request_sent_while_answers_are_due_is_handed_back_whole(tmp_path: Path) -> None:
    asked, handed, answers = uvloop.run(relayed(tmp_path))
    assert [a[:1] for a in answers.split(b"\r\n\r\n")[1:]] == [b"1", b"2", b"3"]
    assert handed == [GET % 3, b""]  # then the third's answer handed back, nothing waiting
    assert asked[0].startswith(b"MHFRONT") and asked[1:] == [GET % 1, GET % 2, GET % 3]
