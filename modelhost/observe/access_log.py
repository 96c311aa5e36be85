"""The access log: one JSON line per HTTP request, to a file or stdout, written on a thread of its
own (a QueueHandler hands records to a QueueListener) so the event loop never waits on the disk.

Each line has what replaying the traffic needs (the input of `modelhost simulate`): time, model,
method, route, status, cache tier, the latency parts in milliseconds, and bytes in and out.
"""

from __future__ import annotations

import json
import logging
import queue
import sys
from logging.handlers import QueueHandler, QueueListener
from typing import Any

from modelhost.observe.exchange import Exchange

STDOUT = "-"


def access_record(exchange: Exchange) -> dict[str, Any]:
    record: dict[str, Any] = {
        "time": round(exchange.time, 3),
        "model": exchange.model,
        "method": exchange.method,
        "route": exchange.route,
        "status": exchange.status,
        "cache": exchange.cache,
        "latency_ms": round(exchange.duration_s * 1000, 3),
        **{f"{part}_ms": round(ms, 3) for part, ms in exchange.timings_ms.items()},
        "bytes_in": exchange.bytes_in,
        "bytes_out": exchange.bytes_out,
        "error": exchange.error,
    }
    return {key: value for key, value in record.items() if value is not None}


class AccessLog:
    """Started with `start()`, flushed and closed with `stop()`; `target` is a path or "-"."""

    def __init__(self, target: str) -> None:
        self.target = target
        self._queue: queue.SimpleQueue[logging.LogRecord] = queue.SimpleQueue()
        self._logger = logging.Logger("modelhost.access")  # private: never reaches the root's
        self._logger.addHandler(QueueHandler(self._queue))
        self._listener: QueueListener | None = None

    def start(self) -> None:
        sink = logging.StreamHandler(sys.stdout) if self.target == STDOUT else None
        handler = sink or logging.FileHandler(self.target, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        self._listener = QueueListener(self._queue, handler)
        self._listener.start()

    def write(self, exchange: Exchange) -> None:
        self._logger.info(json.dumps(access_record(exchange), separators=(",", ":")))

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.stop()  # writes what is queued first
            for handler in self._listener.handlers:
                handler.close()
            self._listener = None
