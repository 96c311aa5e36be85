"""Which HTTP client the load generator should use: aiohttp against httpx, same server, same load.

The figure that matters is the generator's CPU per request (a client that costs less CPU can
drive a faster server from the same cores); throughput is reported too, but on a shared machine
it is the server's as much as the client's.

    python benchmarks/toolkit_clients.py --runs 3 --duration 5 --concurrency 16
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import markdown_table, median, write_results

from modelhost import testing
from modelhost.toolkit.bench import bench_summary, run_bench
from modelhost.toolkit.loadgen import ProcessPlan
from modelhost.toolkit.payloads import Payload
from modelhost.toolkit.traffic import Popularity, Target

CLIENTS = ("aiohttp", "httpx")


def measure(url: str, client: str, concurrency: int, duration_s: float) -> dict[str, float]:
    plan = ProcessPlan(
        Target(url),
        Popularity.uniform(["iris.joblib"]),
        (Payload(b"[5.1, 3.5, 1.4, 0.2]"),),
        duration_s,
        warmup_s=1.0,
        concurrency=concurrency,
        client=client,
    )
    run = run_bench(plan, processes=1)
    summary = bench_summary(plan, run)
    cpu_s = run.diagnostics[0].cpu_s
    return {
        "rps": summary["throughput_rps"],
        "p50_ms": summary["latency_ms"]["p50"],
        "cpu_us_per_request": cpu_s / max(1, len(run.rows)) * 1e6,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        testing.iris_logreg(work / "store/iris.joblib")
        serve = testing.serve_args(work / "store", work / "cache", workers=1)
        with testing.RunningServer(serve, work) as server:
            results = {
                client: [
                    measure(server.url, client, args.concurrency, args.duration)
                    for _ in range(args.runs)
                ]
                for client in CLIENTS
            }
    keys = ("rps", "p50_ms", "cpu_us_per_request")
    rows = [
        [client, *(median([r[key] for r in runs]) for key in keys)]
        for client, runs in results.items()
    ]
    table = markdown_table(["client", "req/s", "p50 ms", "generator CPU µs/request"], rows)
    print(table)
    print(write_results("toolkit-clients", {"args": vars(args), "runs": results}, table))


if __name__ == "__main__":
    main()
