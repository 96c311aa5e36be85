"""Who called: the client's address and authority, in a header the port's guard adds.

A Unix socket names no peer; the guard refuses a client's own header (rpc/frames.py).
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable

from hpack.hpack import encode_integer

HEADER = "x-modelhost-caller"
NEVER_INDEXED = 0x10  # HPACK's literal field that no table keeps: the client's stay in step
CONTINUATION = 0x9
END_HEADERS = 0x4


def value(address: str, foreign_authority: str) -> str:
    """The address, then the authority percent-encoded (a header value must be printable)."""
    if not foreign_authority:
        return address
    return f"{address} {urllib.parse.quote(foreign_authority, safe=':[]')}"


def continuation(stream_id: int, address: str, foreign_authority: str) -> bytes:
    """A CONTINUATION frame ending a header block with the caller's field."""
    field = bytearray((NEVER_INDEXED,))
    for text in (HEADER, value(address, foreign_authority)):
        encoded = text.encode()
        field += encode_integer(len(encoded), 7) + encoded  # plain: no Huffman
    head = len(field).to_bytes(3, "big") + bytes((CONTINUATION, END_HEADERS))
    return head + stream_id.to_bytes(4, "big") + field


def caller(metadata: Iterable[tuple[str, object]] | None) -> tuple[str, str]:
    """The address and foreign authority the guard named; ("", "") for a call that did not
    come through a guard."""
    found = [str(text) for name, text in metadata or () if name == HEADER]
    if len(found) != 1:  # the guard adds one and refuses a client's
        return "", ""
    address, _, authority = found[0].partition(" ")
    return address, urllib.parse.unquote(authority)
