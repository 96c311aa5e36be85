"""Frames survive the trip through a real socket pair, in both the async and blocking readers."""

from __future__ import annotations

import socket
import threading
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelhost.errors import HeaderTooLarge
from modelhost.workers.wire import (
    MAX_HEADER_BYTES,
    MAX_PAYLOAD_BYTES,
    PREFIX,
    Frame,
    FrameBuffer,
    FrameReader,
    encode,
    reply_cap,
)

headers = st.binary(max_size=300)
ids = st.integers(0, 2**64 - 1)


@given(ids, headers, st.binary(max_size=70_000))
def test_blocking_reader_returns_what_was_sent(
    request_id: int, header: bytes, payload: bytes
) -> None:
    left, right = socket.socketpair()
    with left, right:
        data = encode(Frame(request_id, header, payload))
        right.setblocking(True)
        thread = threading.Thread(target=left.sendall, args=(data,))
        thread.start()
        frame = FrameReader(right).read()
        thread.join()
    assert (frame.request_id, frame.header, frame.payload) == (request_id, header, payload)


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


@given(st.lists(st.tuples(ids, headers, st.binary(max_size=3000)), min_size=1, max_size=8))
def test_blocking_reader_splits_frames_that_arrive_together(
    frames: list[tuple[int, bytes, bytes]],
) -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"".join(encode(Frame(*frame)) for frame in frames))
        reader = FrameReader(right)
        received = [reader.read() for _ in frames]
    assert [(f.request_id, f.header, f.payload) for f in received] == frames


def test_header_over_cap_is_refused() -> None:
    """A header over the cap is refused by the sender.

    The reader would take it for a broken peer and drop the worker with every model in it;
    the sender fails the one request instead."""
    with pytest.raises(HeaderTooLarge, match="over the cap"):
        encode(Frame(1, b"x" * (MAX_HEADER_BYTES + 1)))


@given(
    st.lists(st.tuples(ids, headers, st.binary(max_size=3000)), min_size=1, max_size=8),
    st.lists(st.integers(1, 4000), max_size=30),
)
def test_frame_buffer_reassembles_frames(
    frames: list[tuple[int, bytes, bytes]], cuts: list[int]
) -> None:
    """A frame buffer returns the frames however the bytes are cut.

    Partial reads (a prefix split in two, a payload in pieces) and several frames in one read
    give back the frames as sent, each once, in order."""
    data = b"".join(encode(Frame(*frame)) for frame in frames)
    buffer, received, start = FrameBuffer(), [], 0
    for cut in [*cuts, len(data)]:
        received += buffer.feed(data[start : start + cut])
        start += cut
    received += buffer.feed(data[start:])
    assert [(f.request_id, f.header, f.payload) for f in received] == frames


def test_frame_buffer_holds_partial_frame() -> None:
    """A frame buffer holds an incomplete frame until its last byte."""
    data = encode(Frame(7, b"header", b"payload"))
    buffer = FrameBuffer()
    assert buffer.feed(data[:3]) == []  # part of the prefix
    assert buffer.feed(data[3:-1]) == []  # all but the last byte
    (frame,) = buffer.feed(data[-1:] + encode(Frame(8, b"h"))[:5])
    assert (frame.request_id, frame.header, frame.payload) == (7, b"header", b"payload")


def test_frame_buffer_refuses_foreign_peer() -> None:
    """A frame buffer refuses a peer that is not ours."""
    with pytest.raises(ConnectionError, match="not speaking modelhost"):
        FrameBuffer().feed(PREFIX.pack(1, MAX_HEADER_BYTES + 1, 0))


def test_a_large_frame_is_not_copied_at_each_read() -> None:
    """A read of a large frame's payload is kept as it came, not joined to what came before:
    a worker sending 1 GiB in 256 KiB reads had the frontend copy terabytes, and every model
    waited on its loop."""
    buffer = FrameBuffer()
    assert buffer.feed(PREFIX.pack(1, 0, 64 << 20) + bytes(32 << 20)) == []
    chunk = bytes(1 << 18)
    tracemalloc.start()
    try:
        assert buffer.feed(chunk) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < len(chunk), f"a read of {len(chunk)} bytes allocated {peak}"


@pytest.mark.parametrize("cut", [0, 5], ids=["prefix-whole", "prefix-in-pieces"])
def test_a_frame_over_its_cap_is_refused_at_its_prefix(cut: int) -> None:
    """A frame claiming more than its request's cap is refused once its prefix is in, before
    any payload: a worker cannot make the frontend hold more than its call may carry."""
    caps = {1: 100, 2: 10}
    buffer = FrameBuffer(caps.__getitem__)
    prefix = PREFIX.pack(2, 4, 7)
    assert buffer.feed(prefix[:cut]) == []
    with pytest.raises(ConnectionError, match="11 bytes to request 2, over the 10 "):
        buffer.feed(prefix[cut:])


@given(
    st.lists(st.tuples(ids, headers, st.binary(max_size=3000)), min_size=1, max_size=8),
    st.lists(st.integers(1, 4000), max_size=30),
)
def test_frames_at_their_cap_pass(frames: list[tuple[int, bytes, bytes]], cuts: list[int]) -> None:
    """Frames as long as their caps allow come whole, however their bytes are cut."""
    caps: dict[int, int] = {}
    for request_id, header, payload in frames:  # an id twice: its longer frame's
        caps[request_id] = max(caps.get(request_id, 0), len(header) + len(payload))
    data = b"".join(encode(Frame(*frame)) for frame in frames)
    buffer, received, start = FrameBuffer(lambda request_id: caps[request_id]), [], 0
    for cut in [*cuts, len(data)]:
        received += buffer.feed(data[start : start + cut])
        start += cut
    assert len(received) == len(frames)


def test_a_replys_cap_is_its_answers_and_a_header() -> None:
    """An answer a body, each at most max_response_size, and a header; a reply of another
    kind is a header alone; no max_response_size leaves the prefix's own limit."""
    assert reply_cap(3, 1000) == MAX_HEADER_BYTES + 3000
    assert reply_cap(0, 1000) == MAX_HEADER_BYTES
    assert reply_cap(3, 0) == MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES
    assert reply_cap(2**20, 2**20) == MAX_HEADER_BYTES + MAX_PAYLOAD_BYTES
