"""How full the worker's batches are over gRPC and over REST, and why: how requests reach the
model's queue.

The harness of grpc_path.py (iris, `--workers 1`, the server on one core, h2load or wrk on the
other, a connection per user), with the server run by serve_traced.py. Each run reports its
requests a batch (`modelhost_batched_requests_total` / `modelhost_batches_total`), the requests
in the queue or worker at any time (Little's law on the `queue` and `infer` Server-Timing parts),
the requests put in the queue per turn of the event loop, the share of batches of one, and the
frontend's and worker's CPU a request.

    python benchmarks/grpc_batches.py grpc:16 rest:16
    python benchmarks/grpc_batches.py grpc:16 --grpc-servers 1 --duration 6
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from _common import BENCHMARKS, add_serve_arg, markdown_table, write_results
from grpc_path import (
    MODEL,
    MODEL_INFER,
    _wrk,
    check_grpc,
    ensure_h2load,
    grpc_frame,
    h2load,
    model_infer,
    oip_json,
)
from hot_path import ensure_wrk
from prometheus_client.parser import text_string_to_metric_families

from modelhost import testing

HEADER = [
    "target",
    "concurrency",
    "requests/s",
    "requests a batch",
    "in queue or worker",
    "queued a turn (mean, max)",
    "batches of one",
    "frontend CPU ms a request",
    "worker CPU ms a request",
]
COUNTED = (
    "modelhost_batches_total",
    "modelhost_batched_requests_total",
    "modelhost_invocation_part_seconds_sum",
    "modelhost_invocation_part_seconds_count",
    "modelhost_process_cpu_seconds_total",
    "modelhost_worker_cpu_seconds_total",
)
Run = Callable[[int, int], dict[str, Any]]  # (users, seconds) → the load generator's summary


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    ensure_h2load()
    with tempfile.TemporaryDirectory(prefix="modelhost-grpc-batches-") as scratch:
        server, runs = _serve(Path(scratch), args)
        with server:
            results = [_measured(server, runs, target, args) for target in args.targets]
    table = markdown_table(HEADER, [_row(result) for result in results])
    path = write_results("grpc_batches", {"settings": vars(args), "runs": results}, table)
    print(table)
    print(f"\nraw results: {path}")


def _serve(scratch: Path, args: argparse.Namespace) -> tuple[testing.RunningServer, dict[str, Run]]:
    """The traced server (not started), and a load run for each protocol."""
    store = scratch / "store"
    testing.iris_logreg(store / MODEL)
    request = scratch / "model_infer.bin"
    request.write_bytes(grpc_frame(model_infer()))
    grpc_port = testing.free_port()
    args.trace = str(scratch / "trace.jsonl")
    serve_args = ["--model-store", str(store), "--workers", "1", "--grpc-port", str(grpc_port)]
    command = [sys.executable, str(BENCHMARKS / "serve_traced.py"), str(args.trace)]
    server = testing.RunningServer(
        [*serve_args, "--cache-dir", str(scratch / "cache"), *args.serve_arg],
        scratch / "modelhost",
        command=[*command, str(args.grpc_servers)],
        prefix=["taskset", "-c", args.server_core],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        cwd=scratch,
    )

    checked: list[bool] = []

    def grpc(users: int, seconds: int) -> dict[str, Any]:
        if not checked:  # h2load counts an error answer as a success
            check_grpc(f"127.0.0.1:{grpc_port}", request.read_bytes())
            checked.append(True)
        return h2load(f"http://127.0.0.1:{grpc_port}{MODEL_INFER}", request, users, seconds, args)

    def rest(users: int, seconds: int) -> dict[str, Any]:
        return _wrk(f"{server.url}/v2/models/{MODEL}/infer", oip_json(), users, seconds, args)

    return server, {"grpc": grpc, "rest": rest}


def _measured(
    server: testing.RunningServer, runs: dict[str, Run], target: str, args: argparse.Namespace
) -> dict[str, Any]:
    protocol, _, users = target.partition(":")
    run = runs[protocol]
    run(int(users), args.warmup)
    before = _counted(server)
    _trace(server, Path(args.trace))  # the warm-up's tally, discarded
    started = time.monotonic()
    load = run(int(users), args.duration)
    elapsed_s = time.monotonic() - started
    tally = _trace(server, Path(args.trace))
    change = {key: value - before.get(key, 0.0) for key, value in _counted(server).items()}
    result = {"target": protocol, "concurrency": int(users), **_figures(change, elapsed_s)}
    result |= {"requests_per_s": load["requests_per_s"], **_arrivals(tally)}
    print(markdown_table(HEADER, [_row(result)]).splitlines()[-1], flush=True)
    return result


def _counted(server: testing.RunningServer) -> dict[str, float]:
    """The counters, summed over labels but the Server-Timing part."""
    sums: dict[str, float] = {}
    text = httpx.get(server.url + "/metrics", timeout=30).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in COUNTED:
                key = "/".join([sample.name, sample.labels.get("part", "")])
                sums[key] = sums.get(key, 0.0) + sample.value
    return sums


def _trace(server: testing.RunningServer, path: Path) -> dict[str, dict[str, int]]:
    """serve_traced.py's tally since the last one."""
    lines = len(path.read_text().splitlines()) if path.exists() else 0
    os.kill(server.pid, signal.SIGUSR1)
    deadline = time.monotonic() + 10
    while not path.exists() or len(path.read_text().splitlines()) == lines:
        if time.monotonic() > deadline:
            raise RuntimeError("serve_traced.py wrote no tally")
        time.sleep(0.05)
    tally: dict[str, dict[str, int]] = json.loads(path.read_text().splitlines()[-1])
    return tally


def _figures(change: dict[str, float], elapsed_s: float) -> dict[str, float]:
    part_s = "modelhost_invocation_part_seconds_sum/"
    requests = change["modelhost_invocation_part_seconds_count/infer"]
    return {
        "requests_a_batch": change["modelhost_batched_requests_total/"]
        / change["modelhost_batches_total/"],
        "in_queue_or_worker": (change[part_s + "queue"] + change[part_s + "infer"]) / elapsed_s,
        "frontend_cpu_ms": 1000 * change["modelhost_process_cpu_seconds_total/"] / requests,
        "worker_cpu_ms": 1000 * change.get("modelhost_worker_cpu_seconds_total/", 0) / requests,
    }


def _arrivals(tally: dict[str, dict[str, int]]) -> dict[str, Any]:
    turns = {int(size): count for size, count in tally["queued_per_turn"].items()}
    batches = {int(size): count for size, count in tally["batch_sizes"].items()}
    queued = sum(size * count for size, count in turns.items())
    return {
        "queued_a_turn_mean": queued / max(1, sum(turns.values())),
        "queued_a_turn_max": max(turns, default=0),
        "batches_of_one": batches.get(1, 0) / max(1, sum(batches.values())),
        "queued_per_turn": turns,
        "batch_sizes": batches,
    }


def _row(result: dict[str, Any]) -> list[Any]:
    return [
        result["target"],
        result["concurrency"],
        f"{result['requests_per_s']:,.0f}",
        f"{result['requests_a_batch']:.2f}",
        f"{result['in_queue_or_worker']:.2f}",
        f"{result['queued_a_turn_mean']:.2f}, {result['queued_a_turn_max']}",
        f"{result['batches_of_one']:.0%}",
        f"{result['frontend_cpu_ms']:.3f}",
        f"{result['worker_cpu_ms']:.3f}",
    ]


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_serve_arg(parser)
    parser.add_argument("targets", nargs="+", help="PROTOCOL:USERS, e.g. grpc:16 rest:16")
    parser.add_argument("--duration", type=int, default=10, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of discarded warm-up")
    parser.add_argument("--grpc-servers", type=int, default=0, help="0: modelhost's number")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0", help="the load generators' core")
    return parser.parse_args()


if __name__ == "__main__":
    main()
