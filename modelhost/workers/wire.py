"""Frames between the frontend and its workers: ``!QII``, a MessagePack header, raw payload.

Bodies travel as payload, so neither side re-encodes them. The sender refuses a header over
the cap the reader enforces; the frontend's reader also caps each reply by its call.
"""

from __future__ import annotations

import collections
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from modelhost.errors import HeaderTooLarge

PREFIX = struct.Struct("!QII")
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 2**32 - 1  # the prefix's own most
Cap = Callable[[int], int]  # request id → its reply's most bytes past the prefix


@dataclass
class Frame:
    request_id: int  # 0: none
    header: bytes
    payload: bytes = field(default=b"")


def encode(frame: Frame) -> bytes:
    if len(frame.header) > MAX_HEADER_BYTES:
        raise HeaderTooLarge(
            f"the request's headers and parameters take {len(frame.header)} bytes on the way "
            f"to the worker, over the cap of {MAX_HEADER_BYTES}; send shorter values"
        )
    return (
        PREFIX.pack(frame.request_id, len(frame.header), len(frame.payload))
        + frame.header
        + frame.payload
    )


def reply_cap(answers: int, max_answer_bytes: int) -> int:
    """A header, and `answers` bodies of at most `max_answer_bytes` (0: any)."""
    if not answers:
        return MAX_HEADER_BYTES
    payload = answers * max_answer_bytes if max_answer_bytes else MAX_PAYLOAD_BYTES
    return MAX_HEADER_BYTES + min(payload, MAX_PAYLOAD_BYTES)


def _lengths(data: bytes | bytearray, offset: int = 0) -> tuple[int, int, int]:
    request_id, header_len, payload_len = PREFIX.unpack_from(data, offset)
    if header_len > MAX_HEADER_BYTES:
        raise ConnectionError(
            f"frame header of {header_len} bytes: the peer is not speaking modelhost"
        )
    return request_id, header_len, payload_len


class FrameBuffer:
    """Frames cut out of a byte stream however it arrives; no I/O of its own.

    A chunk of whole frames, the usual case, is cut without a copy; a frame in pieces is
    joined once, when whole.
    """

    def __init__(self, cap: Cap | None = None) -> None:
        self._pieces: list[bytes] = []  # an unfinished frame
        self._held = 0
        self._cap = cap  # None: no cap

    def feed(self, data: bytes) -> list[Frame]:
        """The frames `data` completes; `ConnectionError` for a peer that is not ours."""
        if self._pieces:
            self._pieces.append(data)
            self._held += len(data)
            if self.missing() > 0:
                return []
            data = b"".join(self._pieces)
        frames, end = self._cut(data)
        self._pieces = [data[end:]] if end < len(data) else []
        self._held = len(data) - end
        return frames

    def missing(self) -> int:
        """Bytes still to come before the next frame is whole."""
        if self._held < PREFIX.size:
            return PREFIX.size - self._held
        if len(self._pieces[0]) < PREFIX.size:  # the prefix came in pieces
            self._pieces[:] = [b"".join(self._pieces)]
        _, header_len, payload_len = self._lengths(self._pieces[0])
        return PREFIX.size + header_len + payload_len - self._held

    def _lengths(self, data: bytes, offset: int = 0) -> tuple[int, int, int]:
        request_id, header_len, payload_len = _lengths(data, offset)
        if self._cap is not None and header_len + payload_len > (cap := self._cap(request_id)):
            raise ConnectionError(
                f"a reply of {header_len + payload_len} bytes to request {request_id}, over the "
                f"{cap} its call allows (a header, and max_response_size an answer)"
            )
        return request_id, header_len, payload_len

    def _cut(self, data: bytes) -> tuple[list[Frame], int]:
        """The whole frames at the start of `data`, and where the rest starts."""
        frames: list[Frame] = []
        start, size = 0, len(data)
        while size - start >= PREFIX.size:
            request_id, header_len, payload_len = self._lengths(data, start)
            body = start + PREFIX.size + header_len
            end = body + payload_len
            if end > size:
                break
            payload = data[body:end] if payload_len else b""
            frames.append(Frame(request_id, data[start + PREFIX.size : body], payload))
            start = end
        return frames, start


class FrameReader:
    """Blocking reads of frames, one `recv` per frame when it arrives whole."""

    RECV_BYTES = 1 << 16

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.frames = FrameBuffer()
        self.ready: collections.deque[Frame] = collections.deque()

    def pending(self) -> bool:
        """Whether a frame read with the last is still to be taken."""
        return bool(self.ready)

    def read(self) -> Frame:
        while not self.ready:
            chunk = self.sock.recv(max(self.RECV_BYTES, self.frames.missing()))
            if not chunk:
                raise EOFError("the frontend closed the connection")
            self.ready.extend(self.frames.feed(chunk))
        return self.ready.popleft()
