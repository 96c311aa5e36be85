"""Frames survive the trip through a real socket pair, in both the async and blocking readers."""

from __future__ import annotations

import asyncio
import socket
import threading

from hypothesis import given
from hypothesis import strategies as st

from modelhost.workers.wire import Frame, FrameReader, encode, read_frame

headers = st.dictionaries(
    st.text(max_size=10),
    st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20)),  # orjson: 64-bit ints
    max_size=5,
)


@given(headers, st.binary(max_size=70_000))
def test_blocking_reader_returns_what_was_sent(header: dict[str, object], payload: bytes) -> None:
    left, right = socket.socketpair()
    with left, right:
        data = encode(Frame(header, payload))
        right.setblocking(True)
        thread = threading.Thread(target=left.sendall, args=(data,))
        thread.start()
        frame = FrameReader(right).read()
        thread.join()
    assert frame.header == header and frame.payload == payload


def test_async_reader_reads_consecutive_frames() -> None:
    async def scenario() -> list[Frame]:
        reader = asyncio.StreamReader()
        reader.feed_data(encode(Frame({"id": 1}, b"abc")) + encode(Frame({"id": 2})))
        reader.feed_eof()
        return [await read_frame(reader), await read_frame(reader)]

    first, second = asyncio.run(scenario())
    assert (first.header, first.payload) == ({"id": 1}, b"abc")
    assert (second.header, second.payload) == ({"id": 2}, b"")


def test_blocking_reader_reports_a_closed_peer() -> None:
    left, right = socket.socketpair()
    left.close()
    try:
        FrameReader(right).read()
    except EOFError:
        pass
    else:
        raise AssertionError("expected EOFError")
    finally:
        right.close()


@given(st.lists(st.tuples(headers, st.binary(max_size=3000)), min_size=1, max_size=8))
def test_blocking_reader_splits_frames_that_arrive_together(
    frames: list[tuple[dict[str, object], bytes]],
) -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"".join(encode(Frame(header, payload)) for header, payload in frames))
        reader = FrameReader(right)
        received = [reader.read() for _ in frames]
    assert [(f.header, f.payload) for f in received] == frames
