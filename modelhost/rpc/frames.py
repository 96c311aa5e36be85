"""What the gRPC port's guard reads of the HTTP/2 frames passing through it.

Frame heads, and header blocks for their `:authority`; never a message. The fronts enforce the
caps they have (streams, header lists); these are the ones they lack.
"""

from __future__ import annotations

import math
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import NamedTuple

import hpack

from modelhost.protocols.access import names_this_machine
from modelhost.rpc.callers import HEADER as CALLER_HEADER

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
HEAD_BYTES = 9
DATA, HEADERS, RST_STREAM, GOAWAY, CONTINUATION = 0x0, 0x1, 0x3, 0x7, 0x9
END_STREAM, END_HEADERS, PADDED, PRIORITY = 0x1, 0x4, 0x8, 0x20
NO_ERROR, PROTOCOL_ERROR, COMPRESSION_ERROR, ENHANCE_YOUR_CALM = 0x0, 0x1, 0x9, 0xB
RESET_WINDOW_S = 1.0
MESSAGE_PREFIX_BYTES = 5  # gRPC's, before each message: a compressed flag and the length
HEAD = struct.Struct(">HBBBI")  # the length's high 16 bits and low 8, kind, flags, stream
BLOCKS_REMEMBERED = 16  # a connection's repeated header blocks, decoded once
CALLS_GO_S = 2.0  # a cut-off connection's calls live on in grpc.aio (security.md)
BLOCK_REMEMBERED_BYTES = 256  # a client's indexed block is a few bytes


class Head(NamedTuple):
    kind: int
    flags: int
    stream_id: int
    length: int


class Refusal(Exception):
    """The connection must end, with a GOAWAY of this error code."""

    def __init__(self, reason: str, code: int = ENHANCE_YOUR_CALM) -> None:
        super().__init__(reason)
        self.code = code


class Limits(NamedTuple):
    """A connection's limits grpc core does not hold."""

    max_streams: int  # as advertised; a client far past it is refused
    header_block_bytes: int  # a header block's encoded size, CONTINUATIONs included
    first_message_s: float  # from a stream's HEADERS to its first DATA
    resets_per_s: int  # RST_STREAMs from the client in a second (rapid reset)
    idle_s: float = math.inf  # with no call open, then GOAWAY
    age_s: float = math.inf  # of any connection, then GOAWAY
    age_grace_s: float = 0.0  # past its age, for the calls in flight to finish


class StreamBudget:
    """Streams waiting for their first message on every connection of the guards together.

    Each holds a call's memory in grpc core and grpc.aio. Past the budget, the connection holding
    the most ends, so their memory stays within the frontend's allowance and a client that sends
    its messages is not the one shed.
    """

    def __init__(self, max_streams: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_streams = max_streams
        self.clock = clock
        self.held = 0
        self.leaving: deque[tuple[float, int]] = deque()  # (due, streams)
        self.holders: dict[ClientFrames, Callable[[Refusal], None]] = {}  # how to end each

    def let_go(self, streams: int) -> None:
        """Its connection ended: grpc lets their calls go later."""
        if streams:
            self.leaving.append((self.clock() + CALLS_GO_S, streams))

    def over(self) -> bool:
        while self.leaving and self.leaving[0][0] <= self.clock():
            self.held -= self.leaving.popleft()[1]
        return self.held > self.max_streams

    def shed(self, opener: ClientFrames) -> None:
        """Ends the connection holding the most waiting streams, or refuses `opener` unless it
        holds one only."""
        refusal = Refusal(f"more than {self.max_streams} streams without a message on the port")
        hog = max(self.holders, key=lambda holder: len(holder.waiting), default=opener)
        if len(hog.waiting) <= len(opener.waiting):
            if len(opener.waiting) == 1:
                return
            raise refusal
        end = self.holders.pop(hog)
        hog.release()  # its streams go as its connection ends
        end(refusal)


class FrameReader:
    """Splits bytes into frames as they arrive, keeping the payloads `keep(head)` asks for."""

    def __init__(self, keep: Callable[[Head], bool], skip: int = 0) -> None:
        self.keep = keep
        self.skip = skip  # the client's preface, not a frame
        self.head = bytearray()
        self.current: Head | None = None
        self.kept: bytearray | None = None
        self.left = 0  # payload bytes of `current` still to come

    @property
    def between_frames(self) -> bool:
        return not self.skip and not self.head and self.current is None

    def unfinished_block_bytes(self) -> int:
        """The bytes read of an unfinished frame that may belong to a header block: a head
        not yet whole, or a HEADERS or CONTINUATION frame's."""
        if self.current is None:
            return len(self.head)
        if self.current.kind in (HEADERS, CONTINUATION):
            return HEAD_BYTES + self.current.length - self.left
        return 0

    def feed(self, data: bytes) -> Iterator[tuple[Head, bytes, int]]:
        """Each frame `data` completes: its head, its payload if kept, and where it ends."""
        view, at = memoryview(data), 0
        while at < len(view):
            if self.skip:
                taken = min(self.skip, len(view) - at)
                self.skip, at = self.skip - taken, at + taken
            elif self.current is None:
                at = self._read_head(view, at)
            else:
                taken = min(self.left, len(view) - at)
                if self.kept is not None:
                    self.kept += view[at : at + taken]
                self.left, at = self.left - taken, at + taken
            if self.current is not None and not self.left:
                yield self.current, bytes(self.kept or b""), at
                self.current, self.kept = None, None

    def _read_head(self, view: memoryview, at: int) -> int:
        if not self.head and len(view) - at >= HEAD_BYTES:  # a whole head: read it at once
            high, low, kind, flags, stream_id = HEAD.unpack_from(view, at)
            self._start(Head(kind, flags, stream_id & 0x7FFFFFFF, high << 8 | low))
            return at + HEAD_BYTES
        taken = min(HEAD_BYTES - len(self.head), len(view) - at)
        self.head += view[at : at + taken]
        if len(self.head) == HEAD_BYTES:
            length, kind, flags = int.from_bytes(self.head[:3], "big"), self.head[3], self.head[4]
            stream_id = int.from_bytes(self.head[5:], "big") & 0x7FFFFFFF
            self.head.clear()
            self._start(Head(kind, flags, stream_id, length))
        return at + taken

    def _start(self, head: Head) -> None:
        self.current, self.left = head, head.length
        self.kept = bytearray() if self.keep(head) else None


class ClientFrames:
    """The client's side of one connection: its streams, resets and header blocks."""

    def __init__(
        self,
        limits: Limits,
        clock: Callable[[], float] = time.monotonic,
        budget: StreamBudget | None = None,
    ) -> None:
        self.limits = limits
        self.clock = clock
        self.budget = budget or StreamBudget(2 * limits.max_streams)
        self.reader = FrameReader(self.keep, skip=len(PREFACE))
        self.blocks = HeaderBlocks()
        self.block = bytearray()
        self.waiting: dict[int, float] = {}  # stream → opened at, until its first message
        self.arriving: dict[int, FirstMessage] = {}  # of `waiting`: those whose message began
        self.open: set[int] = set()  # streams the server has not ended
        self.idle_since = clock()
        self.last_stream_id = 0
        self.resets, self.resets_since = 0, clock()
        self.foreign_authority = ""  # the first :authority naming another machine
        self.opening = False  # the header block under way opens a stream

    def feed(self, data: bytes) -> list[tuple[Head, int]]:
        """Reads `data`: the last frames of the header blocks opening a stream that it
        completes, each with where it ends in `data`. Raises Refusal where the connection must
        end."""
        block_ends = []
        for head, payload, end in self.reader.feed(data):
            if head.kind == HEADERS:
                self.opening = self.opened(head)
                if self.add_to_block(head, fragment(head, payload)) and self.opening:
                    block_ends.append((head, end))
            elif head.kind == CONTINUATION:
                if self.add_to_block(head, payload) and self.opening:
                    block_ends.append((head, end))
            elif head.kind == DATA:
                self.received(head, payload)
            elif head.kind == RST_STREAM:
                self.ended(head.stream_id)
                self.reset()
        return block_ends

    def keep(self, head: Head) -> bool:
        """Header blocks are kept, up to their cap: an endless one ends the connection; and
        the first message's frames of a waiting stream, for its length."""
        if head.kind == DATA:
            return head.stream_id in self.waiting
        if head.kind not in (HEADERS, CONTINUATION):
            return False
        if len(self.block) + head.length > self.limits.header_block_bytes:
            raise Refusal(f"a header block past {self.limits.header_block_bytes} bytes")
        return True

    def opened(self, head: Head) -> bool:
        """Whether the HEADERS frame opens a stream."""
        if head.stream_id <= self.last_stream_id:
            return False  # trailers, or a protocol error grpc core answers
        self.last_stream_id = head.stream_id
        self.open.add(head.stream_id)
        if head.flags & END_STREAM:
            return True
        self.waiting[head.stream_id] = self.clock()
        self.budget.held += 1
        if len(self.waiting) > 2 * self.limits.max_streams:
            raise Refusal(f"more than {self.limits.max_streams} streams open, as advertised")
        if self.budget.held > self.budget.max_streams and self.budget.over():
            self.budget.shed(self)
        return True

    def received(self, head: Head, payload: bytes) -> None:
        """A waiting stream waits until its first message is whole: a partly sent one holds
        its call in grpc as much as one not begun."""
        if head.stream_id not in self.waiting:
            return
        message = self.arriving.setdefault(head.stream_id, FirstMessage())
        if message.whole_with(data_of(head, payload)) or head.flags & END_STREAM:
            self.settled(head.stream_id)

    def settled(self, stream_id: int) -> None:
        """The stream's first message came, or it ended: it no longer waits."""
        self.arriving.pop(stream_id, None)
        if self.waiting.pop(stream_id, None) is not None:
            self.budget.held -= 1

    def ended(self, stream_id: int) -> None:
        """The stream was reset, or the server sent its end."""
        self.settled(stream_id)
        self.open.discard(stream_id)
        if not self.open:
            self.idle_since = self.clock()

    def idle_for_s(self) -> float:
        """How long the connection has had no call open (0 while one is)."""
        return 0.0 if self.open else self.clock() - self.idle_since

    def release(self) -> None:
        """The connection ended: its streams leave the budget."""
        self.budget.let_go(len(self.waiting))
        self.waiting.clear()
        self.arriving.clear()

    def add_to_block(self, head: Head, fragment: bytes) -> bool:
        """Whether the frame ends the block."""
        self.block += fragment
        if not head.flags & END_HEADERS:
            return False
        fields = self.blocks.new_fields(bytes(self.block))
        self.block.clear()
        self.note_authority(fields)
        return True

    def note_authority(self, fields: object) -> None:
        """Notes a foreign authority; refuses the header the guard names callers in, which
        only the guard may send."""
        for name, value in fields:  # type: ignore[attr-defined]
            if name in (":authority", "host") and not names_this_machine(value):
                self.foreign_authority = self.foreign_authority or value
            elif str(name).lower() == CALLER_HEADER:
                raise Refusal(
                    f"a client sent {CALLER_HEADER}, which the server sets", PROTOCOL_ERROR
                )

    def reset(self) -> None:
        now = self.clock()
        if now - self.resets_since >= RESET_WINDOW_S:
            self.resets, self.resets_since = 0, now
        self.resets += 1
        if self.resets > self.limits.resets_per_s:
            raise Refusal(f"more than {self.limits.resets_per_s} streams reset in a second")

    def check_waiting(self) -> None:
        """Refuses the connection once a stream has waited too long for its first message."""
        oldest = next(iter(self.waiting.values()), None)  # streams open in order
        if oldest is not None and self.clock() - oldest > self.limits.first_message_s:
            raise Refusal(f"no message within {self.limits.first_message_s:g} s of its stream")


class HeaderBlocks:
    """A connection's HPACK decoding, where a block seen before at the same dynamic table is
    not decoded again: a client's calls repeat one indexed block, and decoding it is most of
    what reading a call's frames costs."""

    def __init__(self) -> None:
        self.decoder = hpack.Decoder()
        self.seen: set[bytes] = set()  # blocks decoded at the table as it is now

    def new_fields(self, block: bytes) -> Iterable[tuple[object, object]]:
        """The block's fields; none for a block seen at this table, whose fields were read."""
        if block in self.seen:
            return []
        before = self.table_state()
        try:
            fields = self.decoder.decode(block)
        except hpack.HPACKError as error:
            reason = f"a header block HPACK cannot decode: {error}"
            raise Refusal(reason, COMPRESSION_ERROR) from None
        if self.table_state() != before or len(self.seen) >= BLOCKS_REMEMBERED:
            self.seen.clear()  # the same bytes may now name other fields
        if self.table_state() == before and len(block) <= BLOCK_REMEMBERED_BYTES:
            self.seen.add(block)
        return fields

    def table_state(self) -> tuple[int, int, int]:
        """Changes whenever the dynamic table does: an entry added (its id), or a new size."""
        table = self.decoder.header_table
        entries = table.dynamic_entries
        return len(entries), id(entries[0]) if entries else 0, table.maxsize


class FirstMessage:
    """How much of a stream's first message has come: its prefix, then the bytes still due."""

    __slots__ = ("due", "prefix")

    def __init__(self) -> None:
        self.prefix = b""
        self.due = -1  # unknown until the prefix is whole

    def whole_with(self, data: bytes) -> bool:
        """Adds the next bytes of the stream; True once the message is whole."""
        if self.due < 0:
            taken = MESSAGE_PREFIX_BYTES - len(self.prefix)
            self.prefix, data = self.prefix + data[:taken], data[taken:]
            if len(self.prefix) < MESSAGE_PREFIX_BYTES:
                return False
            self.due = int.from_bytes(self.prefix[1:], "big")
        self.due -= len(data)
        return self.due <= 0


def data_of(head: Head, payload: bytes) -> bytes:
    """A DATA frame's data: its padding taken off."""
    if head.flags & PADDED and payload:
        return payload[1 : max(1, len(payload) - payload[0])]
    return payload


def fragment(head: Head, payload: bytes) -> bytes:
    """A HEADERS frame's header block fragment: its padding and priority taken off."""
    start, end = 0, len(payload)
    if head.flags & PADDED and payload:
        start, end = 1, end - payload[0]
    if head.flags & PRIORITY:
        start += 5
    return payload[start:end] if start <= end else b""


def goaway(last_stream_id: int, code: int, reason: str) -> bytes:
    """A GOAWAY frame: the last stream the server may have taken, the code, and why."""
    payload = last_stream_id.to_bytes(4, "big") + code.to_bytes(4, "big") + reason.encode()
    return len(payload).to_bytes(3, "big") + bytes((GOAWAY, 0)) + bytes(4) + payload
