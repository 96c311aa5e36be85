"""The line a front sends first on each relayed connection: which front, the client, the server.

The main process reads it instead of the Unix socket's own addresses, so the client's address
decides what it decides today (who may manage models, the access log, X-Forwarded-For).
"""

from __future__ import annotations

from typing import NamedTuple

MAGIC = b"MHFRONT"
MAX_BYTES = 256  # a longer first line is not a preamble


class Address(NamedTuple):
    host: str
    port: int


class Preamble(NamedTuple):
    front: int
    client: Address
    server: Address


def encode(preamble: Preamble) -> bytes:
    front, client, server = preamble
    return b"%s %d %s %d %s %d\n" % (
        MAGIC,
        front,
        client.host.encode(),
        client.port,
        server.host.encode(),
        server.port,
    )


def decode(line: bytes) -> Preamble:
    """The preamble in `line` (its newline stripped); ValueError if it is not one."""
    magic, front, client, client_port, server, server_port = line.split(b" ")
    if magic != MAGIC:
        raise ValueError(f"not a front's preamble: {line[:32]!r}")
    return Preamble(
        int(front),
        Address(client.decode("ascii"), int(client_port)),
        Address(server.decode("ascii"), int(server_port)),
    )
