"""A response leaves in one `write`: the head waits for the body, never past the loop's turn."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path

import httpx
import pytest

from modelhost import testing
from modelhost.http.protocol import HeadWithBody

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n"


class Transport:
    """Records what is written; closes when told."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def writelines(self, pieces: Iterable[bytes]) -> None:  # one writev
        self.write(b"".join(pieces))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> str:
        return f"info {name}"


def in_a_loop(steps: Callable[[HeadWithBody, Transport], Awaitable[None]]) -> Transport:
    """Run `steps` against a HeadWithBody over a recording transport; the transport after."""
    transport = Transport()

    async def run() -> None:
        await steps(HeadWithBody(transport, asyncio.get_running_loop()), transport)

    asyncio.run(run())
    return transport


def test_head_and_body_leave_in_one_write() -> None:
    async def steps(held: HeadWithBody, transport: Transport) -> None:
        held.write(HEAD)
        held.write(b"ok")
        await asyncio.sleep(0)

    assert in_a_loop(steps).writes == [HEAD + b"ok"]


def test_lone_head_goes_at_end_of_turn() -> None:
    """A head alone is sent at the end of the turn."""

    async def steps(held: HeadWithBody, transport: Transport) -> None:
        held.write(HEAD)  # a streamed body that comes later
        assert transport.writes == []
        await asyncio.sleep(0)
        assert transport.writes == [HEAD]
        held.write(b"ok")

    assert in_a_loop(steps).writes == [HEAD, b"ok"]


def test_close_sends_the_held_head_first() -> None:
    async def steps(held: HeadWithBody, transport: Transport) -> None:
        held.write(HEAD)
        held.close()
        await asyncio.sleep(0)

    transport = in_a_loop(steps)
    assert transport.writes == [HEAD] and transport.closed


def test_other_writes_and_attributes_pass_through() -> None:
    async def steps(held: HeadWithBody, transport: Transport) -> None:
        held.write(b"0\r\n\r\n")
        held.write(memoryview(b"chunk"))
        assert held.get_extra_info("peername") == "info peername"

    assert in_a_loop(steps).writes == [b"0\r\n\r\n", b"chunk"]


@pytest.mark.e2e
def test_real_server_sends_whole_answers(tmp_path: Path) -> None:
    """A real server sends whole answers and a stream's head at once."""
    store = tmp_path / "store"
    testing.iris_logreg(store / "iris.joblib")
    args = testing.serve_args(store, tmp_path / "cache")
    with testing.RunningServer(args, tmp_path) as server, httpx.Client(timeout=10) as client:
        for _ in range(3):  # keep-alive: each head goes out with its own body
            answer = client.post(
                f"{server.url}/models/iris.joblib/invoke", json=[5.1, 3.5, 1.4, 0.2]
            )
            assert answer.status_code == 200 and answer.json() == {"predictions": [0]}
        assert client.head(f"{server.url}/ping").status_code == 200
        # a stream with no event to send yet: its head must not wait for one
        with client.stream("GET", f"{server.url}/events") as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")


def test_a_body_after_the_connection_closed_is_dropped_with_its_head() -> None:
    """The server cut off a client that reads no answers between the head and the body: uvloop
    raises on a closed transport's write, which surfaced as an unhandled error."""

    async def steps(held: HeadWithBody, transport: Transport) -> None:
        held.write(HEAD)
        transport.close()
        held.write(b"ok")
        held.write(b"more")
        await asyncio.sleep(0)

    assert in_a_loop(steps).writes == []
