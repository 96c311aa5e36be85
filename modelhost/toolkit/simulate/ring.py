"""nginx's `hash KEY consistent` (ketama), point for point, so `simulate --instances` sends each
request to the instance the shipped nginx config sends it to.

As ngx_http_upstream_hash_module.c builds it: each `server HOST:PORT weight=W` line puts 160 × W
points on a ring of 32-bit CRC32 values, point j being crc32(HOST "\\0" PORT prev) where prev is
point j-1 as 4 little-endian bytes (0 for the first), compatible with Cache::Memcached::Fast. The
points of all servers are sorted and duplicates dropped. A key goes to the first point at or
after crc32(KEY), wrapping around; when that point's server is down (or already tried for this
request), to the next point's server, up to 20 steps, after which nginx falls back to
round-robin. An empty key is round-robin from the start. Several servers written alike (one name
resolving to several addresses) share their points; here a name is one instance.
"""

from __future__ import annotations

import bisect
import struct
import zlib
from collections.abc import Collection, Sequence

POINTS_PER_WEIGHT = 160
MAX_STEPS = 20  # nginx's hp->tries limit before it gives up on the ring


class Ring:
    """The ring of `servers`, each as written after `server` in nginx ("10.0.0.5:8080")."""

    def __init__(self, servers: Sequence[str], weights: Sequence[int] | None = None) -> None:
        if not servers:
            raise ValueError("a ring needs at least one server")
        self.servers = list(servers)
        points: dict[int, str] = {}
        for server, weight in zip(self.servers, weights or [1] * len(servers), strict=True):
            for point in server_points(server, weight):
                points.setdefault(point, server)  # nginx keeps one server per point value
        self.hashes = sorted(points)
        self.owners = [points[h] for h in self.hashes]

    def server_for(self, key: str, down: Collection[str] = ()) -> str | None:
        """The server nginx picks for `key` when the servers in `down` are out (None: it would
        fall back to round-robin)."""
        start = bisect.bisect_left(self.hashes, key_hash(key))
        for step in range(MAX_STEPS + 1):
            owner = self.owners[(start + step) % len(self.owners)]
            if owner not in down:
                return owner
        return None


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
    """HOST and PORT as nginx splits them: the port is the trailing digits after the last colon
    (none for `unix:` sockets or a name without one)."""
    raw = server.encode()
    if raw[:5].lower() == b"unix:":
        return raw[5:], b""
    host, colon, port = raw.rpartition(b":")
    if colon and (port.isdigit() or not port):
        return host, port
    return raw, b""
