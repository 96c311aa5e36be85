"""One connection sending a request head without end: what other clients see, and what it costs
the frontend's memory.

A real server (one worker, the example store). A client asks `GET /ping` every 20 ms, alone and
then beside one attacking connection for each phase: a flood of small headers, an endless URL, an
endless header value. The attacker sends as fast as the socket takes bytes and reconnects when the
server closes on it. For each phase: `/ping` latency (p50, p99, most), the frontend's RSS above
its idle size at the most, and how many connections the server closed on the attacker.

    python benchmarks/head_flood.py                       # 10 s a phase
    python benchmarks/head_flood.py --checkout /tmp/at-abc1234 --commit abc1234
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from _common import add_checkout, markdown_table, use_checkout, write_results

PHASES = {
    "alone": (b"", b""),
    "headers": (b"GET /ping HTTP/1.1\r\nHost: x\r\n", b"X-A: b\r\n" * 512),
    "url": (b"GET /", b"a" * 4096),
    "header value": (b"GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ", b"a" * 4096),
}


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


class Attacker(threading.Thread):
    """Sends `head` then `endless` until stopped, reconnecting when the server closes."""

    def __init__(self, port: int, head: bytes, endless: bytes) -> None:
        super().__init__(daemon=True)
        self.port, self.head, self.endless = port, head, endless
        self.stopped, self.closed_by_server = threading.Event(), 0

    def run(self) -> None:
        while not self.stopped.is_set():
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=5) as sock:
                    sock.sendall(self.head)
                    while not self.stopped.is_set():
                        sock.sendall(self.endless)
            except OSError:
                self.closed_by_server += 1
                time.sleep(0.01)


def phase(url: str, pid: int, port: int, name: str, seconds: float) -> dict[str, Any]:
    head, endless = PHASES[name]
    attacker = Attacker(port, head, endless) if head else None
    idle = rss_bytes(pid)
    if attacker:
        attacker.start()
    latencies, most_rss = [], idle
    with httpx.Client(timeout=30) as client:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            client.get(f"{url}/ping")
            latencies.append((time.perf_counter() - started) * 1000)
            most_rss = max(most_rss, rss_bytes(pid))
            time.sleep(0.02)
    if attacker:
        attacker.stopped.set()
        attacker.join(10)
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "phase": name,
        "pings": len(latencies),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(cuts[98], 2),
        "max_ms": round(max(latencies), 2),
        "rss_growth_mib": round((most_rss - idle) / 2**20, 1),
        "closed_by_server": attacker.closed_by_server if attacker else 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase")
    add_checkout(parser)
    args = parser.parse_args()
    cwd = use_checkout(args)
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="head-flood-") as work:
        root = Path(work)
        testing.iris_logreg(root / "store/iris.joblib")
        flags = testing.serve_args(root / "store", root / "cache", workers=1)
        with testing.RunningServer(flags, root, cwd=cwd) as server:
            rows = [phase(server.url, server.pid, server.port, n, args.seconds) for n in PHASES]
    header = ["phase", "/ping p50 (ms)", "p99", "most", "frontend RSS growth (MiB)", "closed"]
    keys = ["phase", "p50_ms", "p99_ms", "max_ms", "rss_growth_mib", "closed_by_server"]
    table = markdown_table(header, [[row[k] for k in keys] for row in rows])
    path = write_results("head_flood", {"commit": args.commit, "phases": rows}, table)
    print(f"{table}\n\nraw results: {path}")


if __name__ == "__main__":
    main()
