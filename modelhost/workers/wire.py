"""Frames between the frontend and its workers: a small JSON header plus raw payload bytes.

A frame is ``!II`` (header length, payload length), the header as UTF-8 JSON, then the payload.
Request bodies and replies travel as payload, so neither side re-encodes them.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from dataclasses import dataclass, field
from typing import Any

PREFIX = struct.Struct("!II")
MAX_HEADER_BYTES = 1 << 20


@dataclass
class Frame:
    header: dict[str, Any]
    payload: bytes = field(default=b"")


def encode(frame: Frame) -> bytes:
    header = json.dumps(frame.header, separators=(",", ":")).encode()
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
    header = json.loads(await reader.readexactly(header_len))
    payload = await reader.readexactly(payload_len) if payload_len else b""
    return Frame(header, payload)


def _recv_exactly(sock: socket.socket, size: int) -> bytes:
    buffer = bytearray(size)
    view = memoryview(buffer)
    received = 0
    while received < size:
        count = sock.recv_into(view[received:], size - received)
        if count == 0:
            raise EOFError("the frontend closed the connection")
        received += count
    return bytes(buffer)


def recv_frame(sock: socket.socket) -> Frame:
    """Blocking read of one frame; raises `EOFError` when the peer has gone."""
    header_len, payload_len = _lengths(_recv_exactly(sock, PREFIX.size))
    header = json.loads(_recv_exactly(sock, header_len))
    payload = _recv_exactly(sock, payload_len) if payload_len else b""
    return Frame(header, payload)
