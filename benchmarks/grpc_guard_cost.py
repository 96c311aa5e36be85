"""What the gRPC port's guard costs: ModelInfer through the guard's public port, straight on
the front's loopback port behind it, and REST's infer, alternately, on one server.

The harness of grpc_path.py (iris, `--workers 1`, the server on one core, h2load or wrk on the
other, a connection per user). Each run reports requests/s, the frontend process's CPU a request
(all its threads, from /proc) and the worker's requests a batch (from /metrics). The front's
Unix socket (or loopback port) is found among the frontend's listening sockets: it is for
measuring only.

    python benchmarks/grpc_guard_cost.py                          # pygrpc-native, 2 rounds
    python benchmarks/grpc_guard_cost.py --front grpc.aio --rounds 3
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
from _common import markdown_table, write_results
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

from modelhost import testing

HEADER = ["target", "requests/s", "frontend CPU ms a request", "requests a batch"]
COUNTERS = ("modelhost_batched_requests_total", "modelhost_batches_total")


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    ensure_h2load()
    with tempfile.TemporaryDirectory(prefix="modelhost-guard-cost-") as scratch:
        scratch_path = Path(scratch)
        testing.iris_logreg(scratch_path / "store" / MODEL)
        request = scratch_path / "model_infer.bin"
        request.write_bytes(grpc_frame(model_infer()))
        port = testing.free_port()
        settings = {"workers": 1, "grpc_port": port, "grpc_front": args.front}
        serve = testing.serve_args(scratch_path / "store", scratch_path / "cache", **settings)
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        prefix = ["taskset", "-c", args.server_core]
        with testing.RunningServer(serve, scratch_path, prefix=prefix, env=env) as server:
            runs = _rounds(server, port, request, args)
    table = markdown_table(HEADER, [_row(run) for run in runs])
    path = write_results("grpc_guard_cost", {"settings": vars(args), "runs": runs}, table)
    print(table)
    print(f"\nraw results: {path}")


def _rounds(
    server: testing.RunningServer, port: int, request: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    guarded, backend = f"127.0.0.1:{port}", front_address(server, port)
    for each in (guarded, backend):
        check_grpc(each, request.read_bytes())
    rest = f"{server.url}/v2/models/{MODEL}/infer"
    loads: dict[str, Callable[[int], dict[str, Any]]] = {
        "gRPC through the guard": lambda s: _grpc(guarded, request, s, args),
        "gRPC straight on the front": lambda s: _grpc(backend, request, s, args),
        "OIP REST": lambda s: _wrk(rest, oip_json(), 16, s, args),
    }
    runs = []
    for _ in range(args.rounds):
        for target, load in loads.items():
            load(args.warmup)
            runs.append({"target": target, "front": args.front, **_measured(server, load, args)})
            print(markdown_table(HEADER, [_row(runs[-1])]).splitlines()[-1], flush=True)
    return runs


def front_address(server: testing.RunningServer, port: int) -> str:
    """The front's Unix socket behind the guard of `port`, as grpc names it; or else the port
    the frontend listens on that is neither HTTP's nor the guard's."""
    process = psutil.Process(server.pid)
    paths = {each.laddr for each in process.net_connections("unix")}
    (path, *_) = sorted(p for p in paths if Path(p).name.startswith(f"grpc-{port}-")) or [""]
    if path:
        return f"unix:{path}"
    sockets = process.net_connections("tcp")
    listening = {each.laddr.port for each in sockets if each.status == psutil.CONN_LISTEN}
    (backend,) = listening - {port, server.port}
    return f"127.0.0.1:{backend}"


def _grpc(address: str, request: Path, seconds: int, args: argparse.Namespace) -> dict[str, Any]:
    if address.startswith("unix:"):  # h2load reaches a Unix socket by its base URI
        return h2load(f"http://127.0.0.1{MODEL_INFER}", request, 16, seconds, args, base=address)
    return h2load(f"http://{address}{MODEL_INFER}", request, 16, seconds, args)


def _measured(
    server: testing.RunningServer, load: Callable[[int], dict[str, Any]], args: argparse.Namespace
) -> dict[str, Any]:
    process = psutil.Process(server.pid)
    before, cpu_before = _counted(server), sum(process.cpu_times()[:2])
    done = load(args.duration)
    cpu_s = sum(process.cpu_times()[:2]) - cpu_before
    after = _counted(server)
    requests, batches = after[0] - before[0], after[1] - before[1]
    return {
        "requests_per_s": done["requests_per_s"],
        "frontend_cpu_ms": 1000 * cpu_s / max(1, done["requests"]),
        "requests_a_batch": requests / max(1.0, batches),
    }


def _counted(server: testing.RunningServer) -> tuple[float, ...]:
    lines = httpx.get(f"{server.url}/metrics", timeout=30).text.splitlines()
    return tuple(
        sum(float(line.split()[-1]) for line in lines if line.split("{")[0].split()[0] == name)
        for name in COUNTERS
    )


def _row(run: dict[str, Any]) -> list[str]:
    return [
        run["target"],
        f"{run['requests_per_s']:,.0f}",
        f"{run['frontend_cpu_ms']:.3f}",
        f"{run['requests_a_batch']:.2f}",
    ]


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--front", default="pygrpc-native", choices=["pygrpc-native", "grpc.aio"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--duration", type=int, default=5, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=2, help="seconds of discarded warm-up")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0", help="the load generators' core")
    return parser.parse_args()


if __name__ == "__main__":
    main()
