"""Faults under load: N clients invoke built-in models for S seconds while a worker is SIGKILLed
every K seconds and the template once (halfway); every answer is counted by status and error
type, and at the end the pool must be whole again.

    python benchmarks/faults.py [--clients 16] [--seconds 60] [--kill-every-s 3] [--workers 2]
                                [--models 8] [--serve-arg=...]
    python benchmarks/faults.py --slowloris 2000 [--seconds 30]

`--slowloris N` runs the other fault instead: N connections that send a request line and then a
header line a second, never the blank line (reopened when the server closes them), while
`/ping` is timed every 50 ms; it reports /ping's latency and how many connections the server
closed (`--header-timeout-s`).

The goal is 0 failed requests for built-in handlers: a batch whose worker died is
retried once on another worker. Until that retry lands, the 503s counted here are the requests
the killed workers held.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import signal
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
from _common import add_serve_arg, markdown_table, write_results

from modelhost import testing

HEADER = [
    "clients",
    "seconds",
    "workers",
    "kills",
    "template kills",
    "requests",
    "ok",
    "failed",
    "failures by kind",
    "p50 ms",
    "p99 ms",
    "max ms",
    "pool whole after",
]


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-faults-") as scratch:
        work = Path(scratch)
        names = [f"m{i}.joblib" for i in range(args.models)]
        for name in names:
            testing.iris_logreg(work / "store" / name)
        serve = testing.serve_args(work / "store", work / "cache", workers=args.workers)
        with testing.RunningServer([*serve, *args.serve_arg], work) as server:
            results = slowloris(server, args) if args.slowloris else run(server, names, args)
            log_text = server.log_text()
    keys, header = (LORIS_KEYS, LORIS_KEYS) if args.slowloris else (KEYS, HEADER)
    table = markdown_table(header, [[results[key] for key in keys]])
    name = "slowloris" if args.slowloris else "faults"
    path = write_results(name, {"args": vars(args), **results}, table)
    path.with_suffix(".log").write_text(log_text)  # the server's log, to explain any failure
    print(table)
    print(f"results: {path}")


KEYS = [
    "clients",
    "seconds",
    "workers",
    "kills",
    "template_kills",
    "requests",
    "ok",
    "failed",
    "failures",
    "p50_ms",
    "p99_ms",
    "max_ms",
    "whole_after",
]


def run(
    server: testing.RunningServer, names: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    stop = threading.Event()
    answers: list[tuple[int, str, float]] = []  # (status, error type, ms)
    messages: dict[str, str] = {}  # the first message of each kind of failure
    lock = threading.Lock()

    def client() -> None:
        row = testing.iris_rows(1)
        with httpx.Client(base_url=server.url, timeout=60) as http:
            while not stop.is_set():
                started = time.perf_counter()
                try:
                    response = http.post(f"/models/{random.choice(names)}/invoke", json=row)
                    status = response.status_code
                    body = {} if status == 200 else response.json()
                    kind = body.get("type", "?") if body else ""
                except httpx.HTTPError as error:
                    status, kind, body = 0, type(error).__name__, {"message": str(error)}
                with lock:
                    answers.append((status, kind, (time.perf_counter() - started) * 1000))
                    if status != 200:
                        messages.setdefault(f"{status} {kind}", body.get("message", kind))

    threads = [threading.Thread(target=client, daemon=True) for _ in range(args.clients)]
    for thread in threads:
        thread.start()
    kills, template_kills = killer(server, args)
    stop.set()
    for thread in threads:
        thread.join(60)
    whole_s = wait_whole(server, args.workers)
    return {**summary(answers, args, kills, template_kills, whole_s), "messages": messages}


def killer(server: testing.RunningServer, args: argparse.Namespace) -> tuple[int, int]:
    """SIGKILL a worker every `kill_every_s`, and the template once halfway; the counts."""
    kills = template_kills = 0
    ends = time.monotonic() + args.seconds
    halfway = time.monotonic() + args.seconds / 2
    while time.monotonic() < ends:
        time.sleep(min(args.kill_every_s, max(0.0, ends - time.monotonic())))
        if template_kills == 0 and time.monotonic() >= halfway:
            template_kills += _kill(template_pids(server))
        kills += _kill(worker_pids(server))
    return kills, template_kills


def _kill(pids: list[int]) -> int:
    if not pids:
        return 0
    try:
        os.kill(random.choice(pids), signal.SIGKILL)
    except ProcessLookupError:
        return 0
    return 1


def worker_pids(server: testing.RunningServer) -> list[int]:
    try:
        return [w["pid"] for w in httpx.get(f"{server.url}/stats", timeout=10).json()["workers"]]
    except httpx.HTTPError:
        return []


def template_pids(server: testing.RunningServer) -> list[int]:
    pids = []
    for child in psutil.Process(server.pid).children():
        try:
            if "modelhost.workers.template" in child.cmdline():
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


def wait_whole(server: testing.RunningServer, workers: int, patience_s: float = 60.0) -> str:
    """Seconds until /ping is 200 with every worker back, or 'no' after `patience_s`."""
    started = time.monotonic()
    while time.monotonic() - started < patience_s:
        try:
            healthy = httpx.get(f"{server.url}/ping", timeout=5).status_code == 200
        except httpx.HTTPError:
            healthy = False
        if healthy and len(worker_pids(server)) == workers:
            return f"{time.monotonic() - started:.1f} s"
        time.sleep(0.1)
    return "no"


def summary(
    answers: list[tuple[int, str, float]],
    args: argparse.Namespace,
    kills: int,
    template_kills: int,
    whole_after: str,
) -> dict[str, Any]:
    latencies = sorted(ms for _, _, ms in answers)
    failures = collections.Counter(
        f"{status} {kind}" for status, kind, _ in answers if status != 200
    )

    def quantile(q: float) -> float:
        return round(latencies[min(len(latencies) - 1, int(q * len(latencies)))], 1)

    return {
        "clients": args.clients,
        "seconds": args.seconds,
        "workers": args.workers,
        "kills": kills,
        "template_kills": template_kills,
        "requests": len(answers),
        "ok": len(answers) - sum(failures.values()),
        "failed": sum(failures.values()),
        "failures": dict(failures) or "none",
        "p50_ms": quantile(0.5) if latencies else None,
        "p99_ms": quantile(0.99) if latencies else None,
        "max_ms": round(latencies[-1], 1) if latencies else None,
        "whole_after": whole_after,
    }


LORIS_KEYS = [
    "connections",
    "seconds",
    "pings",
    "ping_failed",
    "ping_p50_ms",
    "ping_p99_ms",
    "ping_max_ms",
    "closed_by_server",
]


def slowloris(server: testing.RunningServer, args: argparse.Namespace) -> dict[str, Any]:
    stop = threading.Event()
    closed = [0]
    pings: list[float] = []
    failed = [0]

    def open_one() -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"GET /ping HTTP/1.1\r\nHost: localhost\r\n")
        sock.setblocking(False)
        return sock

    def attacker() -> None:
        socks = [open_one() for _ in range(args.slowloris)]
        while not stop.wait(1.0):
            for i, sock in enumerate(socks):
                try:
                    if sock.recv(1024) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    with contextlib.suppress(OSError):
                        sock.send(b"X-a: b\r\n")
                    continue
                except OSError:
                    pass
                closed[0] += 1
                sock.close()
                socks[i] = open_one()
        for sock in socks:
            sock.close()

    def pinger() -> None:
        with httpx.Client(base_url=server.url, timeout=10) as http:
            while not stop.wait(0.05):
                started = time.perf_counter()
                try:
                    ok = http.get("/ping").status_code == 200
                except httpx.HTTPError:
                    ok = False
                pings.append((time.perf_counter() - started) * 1000)
                failed[0] += not ok

    threads = [threading.Thread(target=attacker), threading.Thread(target=pinger)]
    for thread in threads:
        thread.start()
    time.sleep(args.seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    ordered = sorted(pings)

    def quantile(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {
        "connections": args.slowloris,
        "seconds": args.seconds,
        "pings": len(pings),
        "ping_failed": failed[0],
        "ping_p50_ms": quantile(0.5),
        "ping_p99_ms": quantile(0.99),
        "ping_max_ms": round(ordered[-1], 1),
        "closed_by_server": closed[0],
    }


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--kill-every-s", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--models", type=int, default=8)
    parser.add_argument("--slowloris", type=int, default=0, help="half-open connections instead")
    add_serve_arg(parser)
    return parser.parse_args()


if __name__ == "__main__":
    main()
