"""gRPC over HTTP/2 as an ASGI app writes it: the 5-byte message prefix, `grpc-timeout`,
metadata from headers, and the status trailers (grpc/doc/PROTOCOL-HTTP2.md)."""

from __future__ import annotations

import base64
import math
import struct
import urllib.parse
from collections.abc import Iterable
from typing import Any

import grpc

PREFIX = struct.Struct(">BI")  # compressed flag, message length
CONTENT_TYPE = (b"content-type", b"application/grpc")
TIMEOUT_UNITS_S = {"H": 3600.0, "M": 60.0, "S": 1.0, "m": 1e-3, "u": 1e-6, "n": 1e-9}
TIMEOUT_DIGITS = 8
# headers HTTP/2 and gRPC own, which grpc.aio shows no servicer either
NOT_METADATA = frozenset({"content-type", "te", "grpc-timeout", "grpc-encoding", "host"})
Metadata = tuple[tuple[str, Any], ...]
# grpc-message keeps printable ASCII as it is, and percent-encodes the rest and "%" itself
MESSAGE_SAFE = "".join(chr(byte) for byte in range(0x20, 0x7F) if chr(byte) != "%")


class Aborted(Exception):
    """A call ended with a status other than OK (a servicer's `context.abort`)."""

    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        super().__init__(details)
        self.code, self.details = code, details


class MessageTooLarge(Aborted):
    def __init__(self, length: int, most: int) -> None:
        message = f"a {length}-byte message is past --max-request-size, {most} bytes"
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, message)


def framed(message: bytes) -> bytes:
    return PREFIX.pack(0, len(message)) + message


class Messages:
    """Splits a request body into messages as its chunks arrive, each of at most `most`
    bytes: a larger one is refused from its prefix, before its bytes are kept."""

    def __init__(self, most: int) -> None:
        self.most = most
        self.unread = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        self.unread += chunk
        found = []
        while len(self.unread) >= PREFIX.size:
            compressed, length = PREFIX.unpack_from(self.unread)
            if length > self.most:
                raise MessageTooLarge(length, self.most)
            if compressed:
                raise Aborted(grpc.StatusCode.UNIMPLEMENTED, "compressed messages are not served")
            if len(self.unread) < PREFIX.size + length:
                break
            found.append(bytes(self.unread[PREFIX.size : PREFIX.size + length]))
            del self.unread[: PREFIX.size + length]
        return found

    def partial(self) -> bool:
        """Whether the body ended inside a message."""
        return bool(self.unread)


def timeout_s(headers: Iterable[tuple[bytes, bytes]]) -> float:
    """The call's `grpc-timeout` in seconds; infinite without one or with one not understood."""
    for name, value in headers:
        if name == b"grpc-timeout":
            text = value.decode("latin-1")
            digits, unit = text[:-1], text[-1:]
            readable = digits.isascii() and digits.isdigit() and len(digits) <= TIMEOUT_DIGITS
            if readable and unit in TIMEOUT_UNITS_S:
                return int(digits) * TIMEOUT_UNITS_S[unit]
    return math.inf


def metadata(headers: Iterable[tuple[bytes, bytes]]) -> Metadata:
    """The call's metadata as grpc.aio shows it: binary values (`-bin`) decoded."""
    found: list[tuple[str, Any]] = []
    for raw_name, raw_value in headers:
        name = raw_name.decode("latin-1")
        if name in NOT_METADATA or name.startswith(":"):
            continue
        if name.endswith("-bin"):
            found.append((name, base64.b64decode(raw_value + b"==")))
        else:
            found.append((name, raw_value.decode("latin-1")))
    return tuple(found)


def trailers(code: grpc.StatusCode, details: str, extra: Metadata) -> list[tuple[bytes, bytes]]:
    """The status and the servicer's trailing metadata as HTTP/2 trailers."""
    fields = [(b"grpc-status", str(code.value[0]).encode())]
    if details:
        fields.append((b"grpc-message", urllib.parse.quote(details, safe=MESSAGE_SAFE).encode()))
    for name, value in extra:
        if isinstance(value, bytes):
            fields.append((name.encode(), base64.b64encode(value).rstrip(b"=")))
        else:
            fields.append((name.encode(), str(value).encode()))
    return fields
