"""CPU time per request of each server process under load: robust where requests/s are not.

On a shared or noisy machine throughput moves with the neighbours; the CPU each process spends
per answered request moves much less. The server (pinned to core 1) is loaded by wrk (core 0);
while wrk runs, each process's CPU time is read from /proc. Prints requests/s and µs of CPU per
request for every process of the server (modelhost: frontend, template, worker).

    python benchmarks/cpu_per_request.py --concurrency 1 16
    python benchmarks/cpu_per_request.py --servers modelhost --serve-arg=--batch-size --serve-arg=1
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from pathlib import Path

import psutil
from _common import add_serve_arg, markdown_table
from hot_path import MODEL, _invoke_url, _start, ensure_wrk, wrk

from modelhost import testing

HEADER = ["server", "concurrency", "requests/s", "CPU µs/request by process", "total µs"]


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    rows = []
    with tempfile.TemporaryDirectory(prefix="modelhost-cpu-") as scratch:
        store = Path(scratch) / "store"
        testing.iris_logreg(store / MODEL)
        for server in args.servers:
            with _start(server, store, Path(scratch) / server, args) as running:
                url = _invoke_url(server, running.url)
                for connections in args.concurrency:
                    wrk(url, connections, args.warmup, args.wrk_core)
                    rows.append(
                        [server, connections, *_measure(running.pid, url, connections, args)]
                    )
                    print(markdown_table(HEADER, [rows[-1]]).splitlines()[-1], flush=True)
    print(markdown_table(HEADER, rows))


def _measure(pid: int, url: str, connections: int, args: argparse.Namespace) -> list[str]:
    processes = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    before = [_cpu_s(p) for p in processes]
    result: dict[str, float] = {}
    load = threading.Thread(
        target=lambda: result.update(wrk(url, connections, args.duration, args.wrk_core))
    )
    load.start()
    load.join()
    spent = [_cpu_s(p) - b for p, b in zip(processes, before, strict=True)]
    answered = result["requests"]
    per_request = [f"{s / answered * 1e6:,.0f}" for s in spent]
    return [
        f"{result['requests_per_s']:,.0f}",
        " + ".join(per_request),
        f"{sum(spent) / answered * 1e6:,.0f}",
    ]


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--servers", nargs="+", default=["modelhost", "floor"], choices=["modelhost", "floor"]
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--duration", type=int, default=8, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of discarded warm-up")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0")
    add_serve_arg(parser)
    return parser.parse_args()


if __name__ == "__main__":
    main()
