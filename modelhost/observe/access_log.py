"""The access log: one JSON line per request, written in batches on a thread of its own.

Each line holds what `modelhost simulate` needs to replay the traffic. Batching on a thread
keeps the disk off the event loop (docs/decisions.md, "What one request costs"). A file that
is rotated away is reopened, so logrotate needs no `copytruncate`.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
from typing import IO, Any

import msgspec

from modelhost.observe.exchange import Exchange

STDOUT = "-"
FLUSH_S = 0.1  # how long lines gather before one write

logger = logging.getLogger("modelhost.observe")


def access_record(exchange: Exchange) -> dict[str, Any]:
    record: dict[str, Any] = {
        "time": round(exchange.time, 3),
        "model": exchange.model,
        "tenant": exchange.tenant,  # None, and left out, while tenants are off
        "method": exchange.method,
        "route": exchange.route,
        "status": exchange.status,
        "cache": exchange.cache,
        "tier": exchange.tier,
        "latency_ms": round(exchange.duration_s * 1000, 3),
        **{f"{part}_ms": round(ms, 3) for part, ms in exchange.timings_ms.items()},
        "bytes_in": exchange.bytes_in,
        "bytes_out": exchange.bytes_out,
        "model_bytes": exchange.model_bytes,
        "error": exchange.error,
    }
    return {key: value for key, value in record.items() if value is not None}


class AccessLog:
    """Started with `start()`, flushed and closed with `stop()`; `target` is a path or "-"."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._lines: collections.deque[bytes] = collections.deque()  # thread-safe append/pop
        self._waiting = threading.Event()
        self._stopping = False
        self._stream: IO[bytes] | IO[str] | None = None
        self._thread: threading.Thread | None = None
        self._encode = msgspec.json.Encoder().encode

    def start(self) -> None:
        self._stream = sys.stdout if self.target == STDOUT else open(self.target, "ab")  # noqa: SIM115
        self._stopping = False
        self._thread = threading.Thread(target=self._write_lines, name="access-log", daemon=True)
        self._thread.start()

    def write(self, exchange: Exchange) -> None:
        self._lines.append(self._encode(access_record(exchange)) + b"\n")
        if not self._waiting.is_set():
            self._waiting.set()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopping = True
        self._waiting.set()
        self._thread.join()
        self._thread = None
        self._flush()  # lines after the thread's last write
        if self._stream is not None and self._stream is not sys.stdout:
            self._stream.close()
        self._stream = None

    def _reopen_if_moved(self) -> None:
        """Reopen the file if the path no longer names the one open."""
        assert self._stream is not None
        if not self._stream.closed and _names(self.target, self._stream.fileno()):
            return
        self._stream.close()
        self._stream = open(self.target, "ab")  # noqa: SIM115

    def _write_lines(self) -> None:
        while not self._stopping:
            self._waiting.wait()
            time.sleep(FLUSH_S)  # one write for all that gather
            self._waiting.clear()
            self._flush()

    def _flush(self) -> None:
        lines = []
        while self._lines:
            lines.append(self._lines.popleft())
        if not lines or self._stream is None:
            return
        data = b"".join(lines)
        try:
            if self._stream is sys.stdout:
                self._stream.write(data.decode())
            else:
                self._reopen_if_moved()
                self._stream.write(data)  # type: ignore[arg-type]
            self._stream.flush()
        except (OSError, ValueError) as error:  # a full disk, a closed stdout
            logger.warning("the access log lost %d lines: %s", len(lines), error)


def _names(path: str, fd: int) -> bool:
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)
