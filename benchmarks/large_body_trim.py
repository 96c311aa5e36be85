"""What giving the heap back after a large request costs a worker, and what small requests pay.

In one process, a `Worker` on a socketpair with an iris model loaded answers requests as the
worker process does (`Worker._answer`: serve, send, then trim if the exchange was large):

- small: one-row requests, with the trim threshold as shipped and with trimming turned off;
  the difference is what the check costs every request;
- large: 6 MiB one-row bodies (refused after parsing, as in the hostile test), timed whole, and
  the trim that follows each one timed alone.

Prints a markdown table and writes benchmarks/results/large_body_trim-<date>.json (and .md).

    python benchmarks/large_body_trim.py                   # 20000 small, 20 large requests
    python benchmarks/large_body_trim.py --small 2000 --large 5
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import markdown_table, write_results

from modelhost import testing
from modelhost.records import memory
from modelhost.workers import worker as worker_module
from modelhost.workers.messages import Infer, Item, Load, encode
from modelhost.workers.wire import Frame

HEADER = ["requests", "trim threshold", "count", "median µs", "p99 µs"]
MODEL = "iris"


def main() -> None:
    args = parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-trim-") as scratch:
        path = testing.iris_logreg(Path(scratch) / "iris.joblib")
        ours, theirs = socket.socketpair()
        threading.Thread(target=drain, args=(theirs,), daemon=True).start()
        worker = worker_module.Worker(ours, worker_id=1, threads=1)
        worker.load(Load(model=MODEL, path=str(path)))
        rows = run_all(worker, args)
    table = markdown_table(HEADER, rows)
    print(table)
    results = {"rows": [dict(zip(HEADER, row, strict=True)) for row in rows]}
    write_results("large_body_trim", results, table)


def run_all(worker: worker_module.Worker, args: argparse.Namespace) -> list[list[Any]]:
    small = json.dumps(testing.iris_rows(1)).encode()
    large = ("[[" + "0.123456," * (6 * 2**20 // 9 - 2) + "0]]").encode()
    shipped = worker_module.TRIM_AFTER_BYTES
    rows = []
    for threshold in (shipped, 1 << 62):
        worker_module.TRIM_AFTER_BYTES = threshold
        label = "off" if threshold > shipped else f"{shipped} B"
        rows.append(row("small", label, timed(lambda: answer(worker, small), args.small)))
    worker_module.TRIM_AFTER_BYTES = shipped
    rows.append(row("large", f"{shipped} B", timed(lambda: answer(worker, large), args.large)))
    trims = trim_times(worker, large, args.large)
    rows.append(row("large: the trim alone", f"{shipped} B", trims))
    return rows


def answer(worker: worker_module.Worker, body: bytes) -> None:
    item = Item("application/json", "application/json", {}, len(body))
    request = Infer(MODEL, (item,))
    worker._answer(Frame(1, encode(request), body), request)


def trim_times(worker: worker_module.Worker, body: bytes, count: int) -> list[float]:
    """The trim after each of `count` large bodies, timed alone."""
    shipped, worker_module.TRIM_AFTER_BYTES = worker_module.TRIM_AFTER_BYTES, 1 << 62
    durations = []
    try:
        for _ in range(count):
            answer(worker, body)
            started = time.perf_counter()
            memory.trim_heap()
            durations.append(time.perf_counter() - started)
    finally:
        worker_module.TRIM_AFTER_BYTES = shipped
    return durations


def timed(step: Callable[[], None], count: int) -> list[float]:
    """Seconds each of `count` runs of `step` took."""
    durations = []
    for _ in range(count):
        started = time.perf_counter()
        step()
        durations.append(time.perf_counter() - started)
    return durations


def row(requests: str, threshold: str, durations: list[float]) -> list[Any]:
    micros = sorted(d * 1e6 for d in durations)
    p99 = micros[min(len(micros) - 1, int(len(micros) * 0.99))]
    return [requests, threshold, len(micros), round(statistics.median(micros), 1), round(p99, 1)]


def drain(sock: socket.socket) -> None:
    """Read and drop the worker's replies, as the frontend would take them."""
    while sock.recv(1 << 20):
        pass


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--small", type=int, default=20000, help="small requests per setting")
    parser.add_argument("--large", type=int, default=20, help="large requests")
    return parser.parse_args()


if __name__ == "__main__":
    main()
