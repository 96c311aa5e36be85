"""The gRPC guard's reading of HTTP/2 frames, without sockets: heads split anywhere, and the
limits it holds on a client's streams, resets and header blocks."""

from __future__ import annotations

import hpack
import pytest
from hyperframe.frame import ContinuationFrame, DataFrame, HeadersFrame, RstStreamFrame

from modelhost.rpc import callers
from modelhost.rpc.frames import (
    CALLS_GO_S,
    PREFACE,
    ClientFrames,
    FrameReader,
    HeaderBlocks,
    Limits,
    Refusal,
    StreamBudget,
)

LIMITS = Limits(max_streams=4, header_block_bytes=1024, first_message_s=10.0, resets_per_s=8)


def headers(stream_id: int, authority: str = "localhost", end_headers: bool = True) -> bytes:
    fields = [(":method", "POST"), (":path", "/s/m"), (":authority", authority)]
    frame = HeadersFrame(stream_id, data=hpack.Encoder().encode(fields))
    if end_headers:
        frame.flags.add("END_HEADERS")
    return frame.serialize()


class Clock:
    """A clock that moves only when told."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def client(clock: Clock | None = None) -> ClientFrames:
    frames = ClientFrames(LIMITS, clock or Clock())
    frames.feed(PREFACE)
    return frames


def test_frames_split_anywhere_are_read_whole() -> None:
    data = PREFACE + headers(1) + DataFrame(1, data=b"x" * 100).serialize() + headers(3)
    reader = FrameReader(lambda head: head.kind == 0x1, skip=len(PREFACE))
    found = [head for at in range(len(data)) for head, _, _ in reader.feed(data[at : at + 1])]
    assert [(head.kind, head.stream_id) for head in found] == [(1, 1), (0, 1), (1, 3)]
    assert reader.between_frames


def test_a_frame_s_length_and_stream_are_read_whole_or_split() -> None:
    """Past 16 bits of length, and with the reserved bit of its stream id set."""
    frame = bytes((1, 0x11, 0x70, 0x0, 0x0, 0x80, 0, 0, 5)) + b"x" * 70_000
    for step in (len(frame), 4):
        reader = FrameReader(lambda head: False)
        heads = [
            head
            for at in range(0, len(frame), step)
            for head, _, _ in reader.feed(frame[at : at + step])
        ]
        assert [(head.length, head.stream_id) for head in heads] == [(70_000, 5)]


def test_a_repeated_header_block_is_decoded_again_once_the_table_changes() -> None:
    """A block seen before brings no new fields, until a block changes the dynamic table and
    the same bytes name other fields."""
    encoder, blocks = hpack.Encoder(), HeaderBlocks()
    fields = [(":path", "/s/m"), (":authority", "models.example.com")]
    assert blocks.new_fields(encoder.encode(fields)) == fields  # indexed as they are read
    indexed = encoder.encode(fields)
    assert blocks.new_fields(indexed) == fields
    assert blocks.new_fields(indexed) == []
    blocks.new_fields(encoder.encode([("x-other", "value")]))
    assert blocks.new_fields(indexed) == [
        (":authority", "models.example.com"),
        ("x-other", "value"),
    ]


def test_an_undecodable_header_block_is_refused() -> None:
    frames = client()
    with pytest.raises(Refusal, match="HPACK") as refused:
        frames.feed(HeadersFrame(1, data=b"\xff\xff\xff\xff", flags=["END_HEADERS"]).serialize())
    assert refused.value.code == 0x9


def test_a_header_block_past_the_cap_is_refused() -> None:
    frames = client()
    frames.feed(headers(1, end_headers=False))
    with pytest.raises(Refusal, match="header block"):
        for _ in range(2):
            frames.feed(ContinuationFrame(1, data=b"a" * 600).serialize())


def open_and_reset(frames: ClientFrames, first: int, count: int) -> None:
    for stream_id in range(first, first + 2 * count, 2):
        frames.feed(headers(stream_id) + RstStreamFrame(stream_id).serialize())


def test_resets_past_the_rate_are_refused() -> None:
    frames = client()
    open_and_reset(frames, 1, LIMITS.resets_per_s)
    with pytest.raises(Refusal, match="reset"):
        open_and_reset(frames, 101, 1)


def test_resets_at_the_rate_are_allowed() -> None:
    clock = Clock()
    frames = client(clock)
    for second in range(5):
        open_and_reset(frames, 1 + 100 * second, LIMITS.resets_per_s)
        clock.now += 1.0


def test_a_stream_without_its_message_past_the_deadline_is_refused() -> None:
    clock = Clock()
    frames = client(clock)
    frames.feed(headers(1))
    clock.now += LIMITS.first_message_s
    frames.check_waiting()
    clock.now += 1.0
    with pytest.raises(Refusal, match="no message"):
        frames.check_waiting()


def test_a_stream_whose_message_came_is_not_timed() -> None:
    clock = Clock()
    frames = client(clock)
    frames.feed(headers(1) + DataFrame(1, data=b"\0\0\0\0\0").serialize())
    clock.now += 10 * LIMITS.first_message_s
    frames.check_waiting()


def message(length: int, sent: int) -> bytes:
    """The first `sent` bytes of a gRPC message of `length` bytes, its prefix included."""
    return (b"\0" + length.to_bytes(4, "big") + b"x" * length)[:sent]


def test_a_partly_sent_message_still_waits_and_is_timed() -> None:
    """Its call is held in grpc as one without a message is: it stays in the budget."""
    clock = Clock()
    budget = StreamBudget(max_streams=6)
    frames = ClientFrames(LIMITS, clock, budget)
    frames.feed(PREFACE + headers(1) + headers(3))
    frames.feed(DataFrame(1, data=message(100, 3)).serialize())  # the prefix split
    frames.feed(DataFrame(1, data=message(100, 50)[3:]).serialize())
    frames.feed(DataFrame(3, data=message(100, 105), flags=["PADDED"], pad_length=9).serialize())
    assert list(frames.waiting) == [1] and budget.held == 1
    clock.now += LIMITS.first_message_s + 1.0
    with pytest.raises(Refusal, match="no message"):
        frames.check_waiting()


def test_a_message_whole_over_several_frames_settles_its_stream() -> None:
    frames = client()
    frames.feed(headers(1) + DataFrame(1, data=message(40, 20)).serialize())
    frames.feed(DataFrame(1, data=message(40, 45)[20:]).serialize())
    frames.feed(headers(3) + DataFrame(3, data=b"\0\0", flags=["END_STREAM"]).serialize())
    assert not frames.waiting


def test_streams_far_past_the_advertised_cap_are_refused() -> None:
    frames = client()
    with pytest.raises(Refusal, match="streams open"):
        for stream_id in range(1, 8 * LIMITS.max_streams, 2):
            frames.feed(headers(stream_id))


def test_streams_past_the_ports_budget_are_refused_whatever_the_connection() -> None:
    budget = StreamBudget(max_streams=6)
    first, second = (ClientFrames(LIMITS, Clock(), budget) for _ in range(2))
    for frames in (first, second):
        frames.feed(PREFACE + headers(1) + headers(3) + headers(5))
    with pytest.raises(Refusal, match="6 streams without a message"):
        second.feed(headers(7))


def test_past_the_budget_the_connection_holding_most_streams_ends() -> None:
    """Its streams stay counted until grpc has let their calls go: newcomers past the budget
    are refused meanwhile, but for a connection's one stream."""
    clock = Clock()
    budget = StreamBudget(max_streams=6, clock=clock)
    hog, polite, late = (ClientFrames(LIMITS, clock, budget) for _ in range(3))
    ended: list[str] = []
    budget.holders = {
        hog: lambda refusal: ended.append(str(refusal)),
        polite: lambda refusal: ended.append("polite"),
    }
    hog.feed(PREFACE + b"".join(headers(stream_id) for stream_id in range(1, 13, 2)))
    polite.feed(PREFACE + headers(1))
    assert ended == ["more than 6 streams without a message on the port"]
    assert budget.held == 7 and not hog.waiting
    late.feed(PREFACE + headers(1))
    with pytest.raises(Refusal, match="6 streams without a message"):
        late.feed(headers(3))
    clock.now += CALLS_GO_S
    late.feed(headers(5))
    assert budget.held == 4  # the hog's six gone; polite's one and late's three


def test_streams_leave_the_budget_with_their_message_or_their_connection() -> None:
    clock = Clock()
    budget = StreamBudget(max_streams=6, clock=clock)
    frames = ClientFrames(LIMITS, clock, budget)
    frames.feed(PREFACE + headers(1) + headers(3) + headers(5))
    frames.feed(DataFrame(1, data=b"\0\0\0\0\0").serialize() + RstStreamFrame(3).serialize())
    frames.settled(5)  # the server answered it
    assert budget.held == 0
    frames.feed(headers(7) + headers(9))
    frames.release()
    assert budget.held == 2  # until grpc lets their calls go
    clock.now += CALLS_GO_S
    assert not budget.over() and budget.held == 0


def test_the_first_foreign_authority_is_kept() -> None:
    frames = client()
    frames.feed(headers(1, "127.0.0.1:8001") + headers(3, "models.example.com"))
    frames.feed(headers(5, "localhost"))
    assert frames.foreign_authority == "models.example.com"


def test_a_call_the_guard_did_not_relay_is_nobody() -> None:
    assert callers.caller((("content-type", "application/grpc"),)) == ("", "")


def test_a_connection_is_idle_from_its_last_call_s_end() -> None:
    """Idle time counts from the end of the last open call (the server's end, or a reset),
    and from the start when no call ever opened; a call's first message does not end it."""
    clock = Clock()
    frames = client(clock)
    clock.now += 5
    assert frames.idle_for_s() == 5
    frames.feed(headers(1) + headers(3) + DataFrame(1, data=b"x").serialize())
    clock.now += 60
    assert frames.idle_for_s() == 0
    frames.ended(1)
    frames.feed(RstStreamFrame(3, error_code=8).serialize())
    clock.now += 7
    assert frames.idle_for_s() == 7


@pytest.mark.parametrize("name", [callers.HEADER, callers.HEADER.upper()])
def test_a_client_naming_the_callers_header_is_refused(name: str) -> None:
    """Only the guard may name a call's caller: a client's own claim ends its connection."""
    fields = [(":method", "POST"), (":path", "/s/m"), (name, "127.0.0.1")]
    frame = HeadersFrame(1, data=hpack.Encoder().encode(fields), flags=["END_HEADERS"])
    with pytest.raises(Refusal, match=callers.HEADER) as refused:
        client().feed(frame.serialize())
    assert refused.value.code == 0x1  # PROTOCOL_ERROR


def test_the_blocks_opening_streams_are_told_where_they_end() -> None:
    """The last frame of each header block that opens a stream, for the caller's field to
    follow it; never a stream's trailers."""
    frames = client()
    opening = (
        headers(1, end_headers=False) + ContinuationFrame(1, flags=["END_HEADERS"]).serialize()
    )
    trailers = HeadersFrame(1, data=b"\x88", flags=["END_HEADERS", "END_STREAM"]).serialize()
    found = frames.feed(opening + trailers + headers(3))
    ends = [(head.kind, head.stream_id, end) for head, end in found]
    assert ends == [(0x9, 1, len(opening)), (0x1, 3, len(opening + trailers + headers(3)))]
