"""An HTTP store that misbehaves cannot push the disk tier past its budget: a body encoded on the
way is stored as sent (never inflated), a GET longer than its HEAD is cut off at the announced
size, an object of unannounced size gets room as its bytes arrive; and a store that sends slowly
but steadily is not taken for a silent one."""

from __future__ import annotations

import asyncio
import gzip
import http.server
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.loopback import http_server

from modelhost.cache.disk import DiskTier, UnpackLimits
from modelhost.cache.download import DownloadPolicy, download
from modelhost.cache.stores import Stores
from modelhost.cache.stores.http import HttpStore
from modelhost.errors import InsufficientDisk, StoreUnavailable
from modelhost.records.events import EventLog

MiB = 2**20
INFLATED = b"\0" * (32 * MiB)
DEFLATED = gzip.compress(INFLATED)  # about 32 KiB


class Misbehaving(http.server.BaseHTTPRequestHandler):
    """/gzip: a body gzipped whatever the client accepts; /longer: a GET of 64 MiB behind a HEAD
    of 1 KiB; /unsized: HEAD refused, a GET of 64 MiB without a length; /slow: 4 KiB in 200-byte
    pieces, one every 0.1 s. `sent` counts the bytes each path's GETs got out."""

    sent: dict[str, int] = {}
    accepted: list[str] = []

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        if self.path == "/unsized":
            self.send_response(405)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        sizes = {"/gzip": len(DEFLATED), "/longer": 1024, "/slow": 4096}
        self.send_response(200)
        self.send_header("Content-Length", str(sizes[self.path]))
        if self.path == "/gzip":
            self.send_header("Content-Encoding", "gzip")
        self.end_headers()

    def do_GET(self) -> None:  # noqa: N802
        self.accepted.append(self.headers.get("Accept-Encoding", ""))
        self.send_response(200)
        if self.path == "/gzip":
            self.send_header("Content-Encoding", "gzip")
            self.send_header("Content-Length", str(len(DEFLATED)))
        elif self.path == "/slow":
            self.send_header("Content-Length", "4096")
        self.end_headers()
        pieces = {"/gzip": [DEFLATED], "/slow": [b"s" * 200] * 20 + [b"s" * 96]}
        pace = 0.1 if self.path == "/slow" else 0.0
        for piece in pieces.get(self.path) or [b"x" * MiB] * 64:
            try:
                self.wfile.write(piece)
                self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                return
            self.sent[self.path] = self.sent.get(self.path, 0) + len(piece)
            time.sleep(pace)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def origin() -> Iterator[str]:
    with http_server(Misbehaving) as url:
        yield url


def fetched(origin: str, key: str, dest: Path, timeout_s: float = 5.0) -> int:
    async def run() -> int:
        async with httpx.AsyncClient() as client:
            store = HttpStore(origin, client)
            policy = DownloadPolicy(attempts=1, timeout_s=timeout_s)
            return (await download(store, key, dest, policy)).bytes

    return asyncio.run(run())


def test_gzipped_body_is_stored_as_sent(origin: str, tmp_path: Path) -> None:
    """A gzipped body is stored as sent and identity is asked."""
    dest = tmp_path / "m.bin"
    assert fetched(origin, "gzip", dest) == len(DEFLATED)
    assert dest.read_bytes() == DEFLATED
    assert Misbehaving.accepted[-1] == "identity"


def test_long_get_is_cut_at_announced_size(origin: str, tmp_path: Path) -> None:
    """A GET longer than its head is cut off at the announced size."""
    with pytest.raises(StoreUnavailable, match="more than the 1.0 KiB it announced"):
        fetched(origin, "longer", tmp_path / "m.bin")
    assert not (tmp_path / "m.bin").exists()
    assert Misbehaving.sent.get("/longer", 0) < 32 * MiB  # the client hung up early


def test_unannounced_size_gets_room_as_it_arrives(origin: str, tmp_path: Path) -> None:
    """An object of unannounced size gets room as it arrives within the budget."""

    async def run() -> None:
        tier = DiskTier(
            tmp_path / "cache",
            4 * MiB,
            stores=Stores(origin),
            events=EventLog(),
            limits=UnpackLimits(max_bytes=2**30, max_files=100),
            policy=DownloadPolicy(attempts=1, timeout_s=5),
        )
        await tier.reconcile()
        with pytest.raises(InsufficientDisk):
            await tier.materialize("unsized", f"{origin}/unsized")
        await tier.settled()
        assert tier.used_bytes == 0

    asyncio.run(run())
    assert Misbehaving.sent.get("/unsized", 0) < 32 * MiB
    left = sum(p.stat().st_size for p in (tmp_path / "cache").rglob("*") if p.is_file())
    assert left < MiB  # the index, no model bytes


def test_slow_steady_store_is_not_silent(origin: str, tmp_path: Path) -> None:
    """A slow but steady store is not taken for a silent one."""
    assert fetched(origin, "slow", tmp_path / "m.bin", timeout_s=1.0) == 4096
