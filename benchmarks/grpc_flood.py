"""Attackers that open HTTP/2 streams without messages on the gRPC port and reconnect after each
GOAWAY: what `/ping` and a legitimate gRPC client see, and what it costs the frontend's memory.

A real server at the default limits (one worker, iris). A client asks `GET /ping` every 20 ms and
another calls the gRPC health check back to back on one connection, alone and then beside twelve
attacking processes. Each attacker sends batches of 50 `ModelInfer` HEADERS without END_STREAM
as fast as the socket takes them and reconnects whenever the server closes on it; the attackers
run at the lowest CPU priority, as they would from other machines. For each phase:
`/ping` latency (p50, p99, most), health calls a second, the frontend's PSS above its idle size at
the most, the frontend's CPU, and the guard's refusals from /metrics.

    python benchmarks/grpc_flood.py                       # 10 s a phase
    python benchmarks/grpc_flood.py --checkout /tmp/at-abc1234 --commit abc1234
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import hpack
import httpx
from _common import (
    add_checkout,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    use_checkout,
    write_results,
)
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hyperframe.frame import HeadersFrame, SettingsFrame

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
INFER = "/inference.GRPCInferenceService/ModelInfer"
ATTACKERS = 12
BATCH = 50


def pss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def attack(port: int, stop: Any) -> None:
    """Streams without messages, batch after batch, on a new connection whenever one ends."""
    os.nice(19)  # as if from other machines: the server's own cost, not a CPU shared with them
    fields = [(":method", "POST"), (":scheme", "http"), (":path", INFER)]
    fields += [(":authority", f"127.0.0.1:{port}"), ("content-type", "application/grpc")]
    fields += [("te", "trailers")]  # else grpc refuses the call at once
    while not stop.is_set():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(PREFACE + SettingsFrame(0).serialize())
                sock.setblocking(False)
                encoder, stream_id = hpack.Encoder(), 1
                while not stop.is_set():
                    batch = []
                    for _ in range(BATCH):
                        frame = HeadersFrame(stream_id, data=encoder.encode(fields))
                        frame.flags.add("END_HEADERS")
                        batch.append(frame.serialize())
                        stream_id += 2
                    sock.setblocking(True)
                    sock.sendall(b"".join(batch))
                    sock.setblocking(False)
                    try:
                        if sock.recv(65536) == b"":
                            break
                    except BlockingIOError:
                        pass
        except OSError:
            pass


def health_calls(port: int, stop: threading.Event, done: list[int]) -> None:
    """Health checks back to back on one channel; each answered one counts."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        check = health_pb2_grpc.HealthStub(channel).Check
        while not stop.is_set():
            try:
                check(health_pb2.HealthCheckRequest(), timeout=5)
                done.append(1)
            except grpc.RpcError:
                time.sleep(0.01)


def refusals(url: str) -> dict[str, float]:
    found = {}
    for line in httpx.get(f"{url}/metrics").text.splitlines():
        if line.startswith("modelhost_grpc_refusals_total{"):
            found[line.split('"')[1]] = float(line.rsplit(" ", 1)[1])
    return found


def phase(server: Any, port: int, name: str, seconds: float) -> dict[str, Any]:
    processes = multiprocessing.get_context("fork")
    stop, calm = processes.Event(), threading.Event()
    attackers = [processes.Process(target=attack, args=(port, stop)) for _ in range(ATTACKERS)]
    attackers = attackers if name == "streams, reconnecting" else []
    idle, calls, cpu = pss_bytes(server.pid), [], cpu_seconds([server.pid])
    client = threading.Thread(target=health_calls, args=(port, calm, calls))
    client.start()
    while not calls:  # its connection made before the attackers come from the same address
        time.sleep(0.01)
    for attacker in attackers:
        attacker.start()
    latencies, most = [], idle
    with httpx.Client(timeout=30) as http:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.perf_counter()
            http.get(f"{server.url}/ping")
            latencies.append((time.perf_counter() - started) * 1000)
            most = max(most, pss_bytes(server.pid))
            time.sleep(0.02)
    calm.set()
    stop.set()
    for attacker in attackers:
        attacker.join(10)
    client.join(10)
    frontend_cpu_s = cpu_spent(cpu)[server.pid]
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "phase": name,
        "pings": len(latencies),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(cuts[98], 2),
        "max_ms": round(max(latencies), 2),
        "pss_growth_mib": round((most - idle) / 2**20, 1),
        "health_calls_per_s": round((len(calls) - 1) / seconds),
        "frontend_cpu_share": round(frontend_cpu_s / seconds, 2),
        "refusals": refusals(server.url),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="each phase")
    add_checkout(parser)
    args = parser.parse_args()
    cwd = use_checkout(args)
    from modelhost import testing

    with tempfile.TemporaryDirectory(prefix="grpc-flood-") as work:
        root = Path(work)
        testing.iris_logreg(root / "store/iris.joblib")
        port = testing.free_port()
        flags = testing.serve_args(root / "store", root / "cache", workers=1, grpc_port=port)
        with testing.RunningServer(flags, root, cwd=cwd) as server:
            phases = ["alone", "streams, reconnecting"]
            rows = [phase(server, port, name, args.seconds) for name in phases]
    header = ["phase", "/ping p50 (ms)", "p99", "most", "frontend PSS growth (MiB)", "health/s"]
    header += ["frontend CPU (cores)"]
    keys = ["phase", "p50_ms", "p99_ms", "max_ms", "pss_growth_mib", "health_calls_per_s"]
    keys += ["frontend_cpu_share"]
    table = markdown_table(header, [[row[k] for k in keys] for row in rows])
    path = write_results("grpc_flood", {"commit": args.commit, "phases": rows}, table)
    print(f"{table}\n\nrefusals: {rows[-1]['refusals']}\nraw results: {path}")


if __name__ == "__main__":
    main()
