"""Hot path: modelhost against the in-process floor on one iris model, driven by wrk.

Each server is pinned to one core (`taskset -c 1`; modelhost with `--workers 1`, so frontend and
worker share that core) and wrk runs on the other (`taskset -c 0 wrk -t1`). For each concurrency
a warm-up run is discarded, then one measured run. Prints a markdown table and writes
benchmarks/results/hot_path-<date>.json (and .md).

    python benchmarks/hot_path.py                       # C in 1 16 64, 15 s runs, 5 s warm-up
    python benchmarks/hot_path.py --servers floor --concurrency 1 --duration 3 --warmup 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import BENCHMARKS, add_wrk_run_args, markdown_table, write_results

from modelhost import testing

MODEL = "iris.joblib"
HEADER = ["server", "concurrency", "requests/s", "p50 ms", "p99 ms", "errors"]


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="modelhost-hot-path-") as scratch:
        scratch_path = Path(scratch)
        store = scratch_path / "store"
        testing.iris_logreg(store / MODEL)
        runs = [
            run
            for server in args.servers
            for run in _bench_server(server, store, scratch_path, args)
        ]
    table = markdown_table(HEADER, [_table_row(run) for run in runs])
    path = write_results("hot_path", {"settings": vars(args), "runs": runs}, table)
    print(table)
    print(f"\nraw results: {path}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--servers", nargs="+", default=["modelhost", "floor"], choices=["modelhost", "floor"]
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16, 64])
    add_wrk_run_args(parser, duration_s=15, warmup_s=5)
    return parser.parse_args()


def ensure_wrk() -> None:
    """Install wrk with apt-get when it is missing (root, or sudo without a password)."""
    if shutil.which("wrk"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print("wrk is missing; installing it with apt-get", file=sys.stderr)
    subprocess.run([*sudo, "apt-get", "update"], check=True)
    subprocess.run([*sudo, "apt-get", "install", "-y", "wrk"], check=True)


def _bench_server(
    server: str, store: Path, scratch: Path, args: argparse.Namespace
) -> list[dict[str, Any]]:
    with _start(server, store, scratch, args) as running:
        url = _invoke_url(server, running.url)
        runs = []
        for connections in args.concurrency:
            wrk(url, connections, args.warmup, args.wrk_core)
            result = wrk(url, connections, args.duration, args.wrk_core)
            runs.append({"server": server, "concurrency": connections, **result})
            print(markdown_table(HEADER, [_table_row(runs[-1])]).splitlines()[-1], flush=True)
        return runs


FLOORS = {"floor": "floor_app.py", "boundary-floor": "boundary_floor_app.py"}
SERVERS = ("modelhost", *FLOORS)  # what `_start` can start


def _start(
    server: str, store: Path, scratch: Path, args: argparse.Namespace
) -> testing.RunningServer:
    pin = ["taskset", "-c", args.server_core]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # not from the current folder: `python -m modelhost` there would import a checkout's package
    # before PYTHONPATH's, and comparing two versions by PYTHONPATH would compare one with itself
    scratch.mkdir(parents=True, exist_ok=True)
    serve_args, command = _command(server, store, scratch, args)
    return testing.RunningServer(
        serve_args, scratch, command=command, prefix=pin, env=env, cwd=scratch
    )


def _command(
    server: str, store: Path, scratch: Path, args: argparse.Namespace
) -> tuple[list[str], list[str] | None]:
    """The server's arguments, and its command (None: `python -m modelhost serve`)."""
    if server in FLOORS:
        return [], [sys.executable, str(BENCHMARKS / FLOORS[server]), str(store / MODEL)]
    serve_args = [
        "--model-store",
        str(store),
        "--workers",
        "1",
        "--cache-dir",
        str(scratch / "cache"),
        *args.serve_arg,
    ]
    without = getattr(args, "without", None)  # cpu_per_request's: a part switched off
    if without:
        return serve_args, [sys.executable, str(BENCHMARKS / "serve_without.py"), without]
    return serve_args, None


def _invoke_url(server: str, base_url: str) -> str:
    return f"{base_url}/models/{MODEL}/invoke" if server == "modelhost" else f"{base_url}/"


def wrk(url: str, connections: int, duration_s: int, core: str, threads: int = 1) -> dict[str, Any]:
    """One wrk run with post.lua; its summary (latencies in ms) and raw output."""
    command = [
        "taskset",
        "-c",
        core,
        "wrk",
        f"-t{threads}",
        f"-c{connections}",
        f"-d{duration_s}s",
        "--latency",
        "-s",
        str(BENCHMARKS / "post.lua"),
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return {**parse_wrk(done.stdout), "wrk_output": done.stdout}


def parse_wrk(output: str) -> dict[str, Any]:
    """The `WRK_JSON` line post.lua's done() prints, in ms and requests/s."""
    line = next(x for x in output.splitlines() if x.startswith("WRK_JSON "))
    summary = json.loads(line.removeprefix("WRK_JSON "))
    latency_ms = {key: value / 1000 for key, value in summary["latency_us"].items()}
    return {
        "requests": summary["requests"],
        "requests_per_s": summary["requests"] / (summary["duration_us"] / 1e6),
        "latency_ms": latency_ms,
        "errors": summary["errors"],
        "error_count": sum(summary["errors"].values()),
    }


def _table_row(run: dict[str, Any], label: str = "server") -> list[Any]:
    latency = run["latency_ms"]
    return [
        run[label],
        run["concurrency"],
        run["requests_per_s"],
        latency["p50"],
        latency["p99"],
        run["error_count"],
    ]


if __name__ == "__main__":
    main()
