"""nginx's `hash KEY consistent` (ketama), point for point, as ngx_http_upstream_hash_module.c.

Each server line puts 160 × weight CRC32 points on a ring, each chained to the one before. A key
goes to the first point at or after crc32(KEY), skipping servers that are down.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Collection, Sequence

POINTS_PER_WEIGHT = 160
MAX_STEPS = 20  # nginx's limit before it falls back to round-robin


class Ring:
    """The ring of `servers`, each as written after `server` in nginx."""

    def __init__(self, servers: Sequence[str], weights: Sequence[int] | None = None) -> None:
        if not servers:
            raise ValueError("a ring needs at least one server")
        self.servers = list(servers)
        points: dict[int, str] = {}
        for server, weight in zip(self.servers, weights or [1] * len(servers), strict=True):
            address, weight = parse_line(server, weight)
            for point in server_points(address, weight):
                points.setdefault(point, server)  # nginx keeps one server per point
        self.hashes = sorted(points)
        self.owners = [points[h] for h in self.hashes]

    def server_for(self, key: str, down: Collection[str] = ()) -> str | None:
        """The server nginx picks for `key` with `down` out; None for round-robin."""
        start = bisect.bisect_left(self.hashes, key_hash(key))
        for step in range(MAX_STEPS + 1):
            owner = self.owners[(start + step) % len(self.owners)]
            if owner not in down:
                return owner
        return None


def parse_line(server: str, weight: int = 1) -> tuple[str, int]:
    """The address and weight of a `server` line's text: nginx hashes the address alone."""
    address, *parameters = server.rstrip("; ").split()
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        weight = int(value) if name == "weight" else weight
    return address, weight


def key_hash(key: str) -> int:
    return zlib.crc32(key.encode())


def server_points(server: str, weight: int = 1) -> list[int]:
    """The ring points of one `server` line, in the order nginx computes them."""
    host, port = split_server(server)
    base = host + b"\0" + port
    points, previous = [], 0
    for _ in range(POINTS_PER_WEIGHT * weight):
        previous = zlib.crc32(base + struct.pack("<I", previous))
        points.append(previous)
    return points


def split_server(server: str) -> tuple[bytes, bytes]:
    """HOST and PORT as nginx splits them, at the last colon before digits."""
    raw = server.encode()
    if raw[:5].lower() == b"unix:":
        return raw[5:], b""
    host, colon, port = raw.rpartition(b":")
    if colon and (port.isdigit() or not port):
        return host, port
    return raw, b""
