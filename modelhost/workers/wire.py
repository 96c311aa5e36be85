"""Frames between the frontend and its workers: a small JSON header plus raw payload bytes.

A frame is ``!II`` (header length, payload length), the header as UTF-8 JSON, then the payload.
Request bodies and replies travel as payload, so neither side re-encodes them. Headers are
encoded with orjson: a frame's header is written and read once on each side per batch, and the
standard library's json costs several times more there (docs/decisions.md).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

import orjson

PREFIX = struct.Struct("!II")
MAX_HEADER_BYTES = 1 << 20


@dataclass
class Frame:
    header: dict[str, Any]
    payload: bytes = field(default=b"")


def encode(frame: Frame) -> bytes:
    header = orjson.dumps(frame.header)
    return PREFIX.pack(len(header), len(frame.payload)) + header + frame.payload


def _lengths(prefix: bytes) -> tuple[int, int]:
    header_len, payload_len = PREFIX.unpack(prefix)
    if header_len > MAX_HEADER_BYTES:
        raise ConnectionError(
            f"frame header of {header_len} bytes: the peer is not speaking modelhost"
        )
    return header_len, payload_len


async def read_frame(reader: asyncio.StreamReader) -> Frame:
    """Read one frame; raises `asyncio.IncompleteReadError` when the peer has gone."""
    header_len, payload_len = _lengths(await reader.readexactly(PREFIX.size))
    header = orjson.loads(await reader.readexactly(header_len))
    payload = await reader.readexactly(payload_len) if payload_len else b""
    return Frame(header, payload)


class FrameReader:
    """Blocking reads of frames from a socket, with as few `recv` calls as the data allows:
    one per frame when it arrives whole, which is the usual case for requests."""

    RECV_BYTES = 1 << 16

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()

    def read(self) -> Frame:
        """The next frame; raises `EOFError` when the peer has gone."""
        while (frame := self._take()) is None:
            chunk = self.sock.recv(max(self.RECV_BYTES, self._missing()))
            if not chunk:
                raise EOFError("the frontend closed the connection")
            self.buffer += chunk
        return frame

    def _missing(self) -> int:
        if len(self.buffer) < PREFIX.size:
            return PREFIX.size
        header_len, payload_len = _lengths(bytes(self.buffer[: PREFIX.size]))
        return PREFIX.size + header_len + payload_len - len(self.buffer)

    def _take(self) -> Frame | None:
        if len(self.buffer) < PREFIX.size:
            return None
        header_len, payload_len = _lengths(bytes(self.buffer[: PREFIX.size]))
        end = PREFIX.size + header_len + payload_len
        if len(self.buffer) < end:
            return None
        header = orjson.loads(self.buffer[PREFIX.size : PREFIX.size + header_len])
        payload = bytes(self.buffer[PREFIX.size + header_len : end])
        del self.buffer[:end]
        return Frame(header, payload)
