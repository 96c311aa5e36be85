"""Cores: modelhost against the in-process floor as the server is given more cores.

For each count N of server cores (1, 2, 4, 8, 16 by default; at most all usable cores but one),
the server runs on the last N cores (`taskset`) and the load on the others: modelhost with
`--workers N --workers-per-model 0`, the floor as N processes of `floor_app.py`, one a core, on
one port (SO_REUSEPORT). wrk drives the iris and the forest hot paths with one thread a load core
and 16 connections a server core; a warm-up run is discarded, then one measured run. The churn
of `churn.py` runs at each N of --churn-cores (its floor is its own single process). modelhost
runs once for each of --fronts (`cores`: one front process a server core, `--fronts N`). A run that
fails or would end past --budget-s is a row marked so. Prints markdown tables and writes
benchmarks/results/cores-<date>.json (and .md). scripts/device_cores.sh runs it without network.

    python benchmarks/cores.py                                  # the whole sweep
    python benchmarks/cores.py --cores 1 --churn-duration 0     # 1 core against 1, no churn
    python benchmarks/cores.py --churn-cores 1 4 16 --budget-s 440
    python benchmarks/cores.py --fronts cores                   # modelhost with a front a core
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    BENCHMARKS,
    add_serve_arg,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    process_tree,
    write_results,
)
from hot_path import ensure_wrk, wrk

from modelhost import testing

MiB = 2**20
SERVERS = ("modelhost", "floor")
HEADER = ["server cores", "load cores", "server", "fronts", "model", "connections", "requests/s"]
HEADER += ["p99 ms", "frontend share", "frontend µs a request", "errors"]


@dataclass(frozen=True)
class Split:
    """Which cores the server has and which the load generator has."""

    server: list[int]
    load: list[int]

    @staticmethod
    def of(count: int, usable: list[int]) -> Split:
        return Split(server=usable[-count:], load=usable[:-count])

    def taskset(self, side: str) -> str:
        return ",".join(str(core) for core in getattr(self, side))


@dataclass(frozen=True)
class HotModel:
    """A model of the hot path: its file, how it is made, and the body wrk posts (None: iris)."""

    name: str
    make: Callable[[Path], Path]
    body: str | None


HOT_MODELS = {
    "iris": HotModel("iris.joblib", testing.iris_logreg, None),
    # the churn's 8 MiB digits forest; the floor runs its own predict, tree by tree in sklearn
    "forest": HotModel(
        "forest.joblib",
        lambda path: testing.random_forest(path, 8 * MiB),
        json.dumps(testing.digits_rows(1)),
    ),
}


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    started = time.monotonic()
    usable = sorted(os.sched_getaffinity(0))
    counts = core_counts(args.cores, usable)
    print(f"server cores: {counts}", flush=True)
    rows: list[dict[str, Any]] = []
    print(markdown_table(HEADER, []), flush=True)
    with tempfile.TemporaryDirectory(prefix="modelhost-cores-") as scratch:
        store = Path(scratch) / "store"
        for model in args.models:
            HOT_MODELS[model].make(store / HOT_MODELS[model].name)
            for count in counts:
                for server, fronts in runs_at(count, args):
                    plan = _hot_plan(server, model, count, store, fronts)
                    _add(rows, [_bounded(args, started, plan)])
        churn_counts = core_counts(args.churn_cores or args.cores, usable)
        for count in churn_counts if args.churn_duration else []:
            _add(rows, _bounded_churn(args, started, count))
    report(rows, {"settings": vars(args), "server_core_counts": counts})


def _add(rows: list[dict[str, Any]], new: list[dict[str, Any]]) -> None:
    """Keep `new` and print it as it comes: a run cut short still shows what it measured."""
    rows.extend(new)
    for row in new:
        print(markdown_table(HEADER, [_table_row(row)]).splitlines()[-1], flush=True)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cores", nargs="+", type=int, default=[1, 2, 4, 8, 16])
    parser.add_argument("--servers", nargs="+", default=list(SERVERS), choices=SERVERS)
    parser.add_argument("--models", nargs="*", default=list(HOT_MODELS), choices=HOT_MODELS)
    parser.add_argument("--duration", type=int, default=8, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=3, help="seconds of discarded warm-up")
    parser.add_argument("--connections-per-core", type=int, default=16)
    parser.add_argument(
        "--fronts",
        nargs="+",
        default=["1", "cores"],
        help="modelhost's --fronts for each run: a number, or cores (one a server core)",
    )
    parser.add_argument("--churn-duration", type=int, default=10, help="seconds (0: no churn)")
    parser.add_argument("--churn-cores", nargs="+", type=int, help="server cores (--cores's)")
    parser.add_argument(
        "--churn-arg", action="append", default=[], help="extra argument for churn.py"
    )
    parser.add_argument(
        "--budget-s", type=float, default=0, help="skip runs that would end later (0: none)"
    )
    add_serve_arg(parser)
    return parser.parse_args()


def core_counts(wanted: list[int], usable: list[int]) -> list[int]:
    """The server core counts to run: each wanted one, capped so one core is left for load."""
    if len(usable) < 2:
        raise SystemExit(f"needs two usable cores at least, has {usable}")
    return sorted({min(count, len(usable) - 1) for count in wanted if count > 0})


def runs_at(count: int, args: argparse.Namespace) -> list[tuple[str, int]]:
    """(server, fronts) for each run at `count` server cores; the floor has no fronts."""
    fronts = sorted({count if asked == "cores" else int(asked) for asked in args.fronts})
    return [
        (server, each)
        for server in args.servers
        for each in (fronts if server == "modelhost" else [1])
    ]


# ------------------------------------------------------------------------------- budget


def _bounded(args: argparse.Namespace, started: float, plan: dict[str, Any]) -> dict[str, Any]:
    """Run `plan` unless the budget would be spent before it ends; then a skipped row."""
    estimate_s = args.warmup + args.duration + 15  # starting, loading, stopping
    if args.budget_s and time.monotonic() - started + estimate_s > args.budget_s:
        return {**plan["row"], "skipped": "budget"}
    try:
        return {**plan["row"], **plan["run"](args)}
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        return {**plan["row"], "skipped": f"failed: {error}"[:2000]}


def _bounded_churn(args: argparse.Namespace, started: float, count: int) -> list[dict[str, Any]]:
    estimate_s = 2 * args.churn_duration + 60  # each server's start, the footprints alone
    row = {"server_cores": count, "model": "churn"}
    if args.budget_s and time.monotonic() - started + estimate_s > args.budget_s:
        return [{**row, "server": server, "skipped": "budget"} for server in SERVERS]
    try:
        return churn(args, count)
    except (OSError, RuntimeError, subprocess.SubprocessError) as error:
        return [{**row, "server": "modelhost", "skipped": f"failed: {error}"[:2000]}]


# ------------------------------------------------------------------------------- hot paths


def _hot_plan(server: str, model: str, count: int, store: Path, fronts: int) -> dict[str, Any]:
    row = {"server_cores": count, "server": server, "model": model, "fronts": fronts}
    hot = HOT_MODELS[model]
    return {"row": row, "run": lambda args: hot_run(server, hot, count, store, args, fronts)}


def hot_run(
    server: str,
    model: HotModel,
    count: int,
    store: Path,
    args: argparse.Namespace,
    fronts: int = 1,
) -> dict[str, Any]:
    """One server given `count` cores under wrk on the rest: throughput, latency, CPU."""
    split = Split.of(count, sorted(os.sched_getaffinity(0)))
    start = _modelhost if server == "modelhost" else _floor
    with (
        tempfile.TemporaryDirectory(prefix=f"cores-{server}-") as scratch,
        start(store, model.name, split, Path(scratch), args, fronts) as (url, roots),
        _body(model.body),
    ):
        frontend = frontend_pids(roots[0]) if server == "modelhost" else []
        return _measure(url, roots, frontend, split, args)


def frontend_pids(main: int) -> list[int]:
    """modelhost's frontend: the main process and its front processes (`--fronts`)."""
    import psutil

    children = psutil.Process(main).children()
    return [main, *(p.pid for p in children if "modelhost.fronts" in " ".join(p.cmdline()))]


def _measure(
    url: str, roots: list[int], frontend: list[int], split: Split, args: argparse.Namespace
) -> dict:
    """Warm up, then the measured run; `roots` are the server's processes."""
    connections = args.connections_per_core * len(split.server)
    threads = min(len(split.load), connections)
    load = split.taskset("load")
    wrk(url, connections, args.warmup, load, threads)
    before = cpu_seconds([pid for root in roots for pid in process_tree(root)])
    result = wrk(url, connections, args.duration, load, threads)
    cpu = cpu_shares(cpu_spent(before), frontend, result["requests"])
    return {"load_cores": len(split.load), "connections": connections, **result, **cpu}


def cpu_shares(spent: dict[int, float], frontend_pids: list[int], requests: int) -> dict:
    """The server's CPU µs a request, and its frontend's (none: the floor has none)."""
    total = sum(spent.values())
    per_us = 1e6 / max(1, requests)
    shares: dict[str, float | None] = {"server_us_per_request": total * per_us}
    if not frontend_pids:
        return {**shares, "frontend_share": None, "frontend_us_per_request": None}
    frontend = sum(spent.get(pid, 0.0) for pid in frontend_pids)
    share = frontend / total if total else None
    return {**shares, "frontend_share": share, "frontend_us_per_request": frontend * per_us}


@contextlib.contextmanager
def _body(body: str | None) -> Iterator[None]:
    """post.lua's body for the runs inside (its own iris row when None)."""
    if body is None:
        yield
        return
    os.environ["WRK_BODY"] = body
    try:
        yield
    finally:
        del os.environ["WRK_BODY"]


@contextlib.contextmanager
def _modelhost(
    store: Path, name: str, split: Split, scratch: Path, args: argparse.Namespace, fronts: int
) -> Iterator[tuple[str, list[int]]]:
    count = len(split.server)
    serve = testing.serve_args(
        store, scratch / "cache", workers=count, workers_per_model=0, fronts=fronts
    )
    serve += args.serve_arg
    pin = ["taskset", "-c", split.taskset("server")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # started from scratch: `python -m` would import a checkout's package before PYTHONPATH's
    with testing.RunningServer(serve, scratch, prefix=pin, env=env, cwd=scratch) as server:
        yield f"{server.url}/models/{name}/invoke", [server.pid]


@contextlib.contextmanager
def _floor(
    store: Path, name: str, split: Split, scratch: Path, args: argparse.Namespace, fronts: int
) -> Iterator[tuple[str, list[int]]]:
    """The in-process floor, one process a server core, all on one port."""
    port = testing.free_port()
    floor = [sys.executable, str(BENCHMARKS / "floor_app.py"), str(store / name)]
    floor += ["--port", str(port), "--reuse-port"]
    with contextlib.ExitStack() as stack:
        processes = [
            stack.enter_context(_pinned(floor, core, scratch / f"floor-{core}.log"))
            for core in split.server
        ]
        for process in processes:
            _wait_listening(process, port)
        yield f"http://127.0.0.1:{port}/", [process.pid for process in processes]


@contextlib.contextmanager
def _pinned(command: list[str], core: int, log_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            ["taskset", "-c", str(core), *command],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=log_path.parent,
        )
    try:
        yield process
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _wait_listening(process: subprocess.Popen[bytes], port: int, timeout_s: float = 60) -> None:
    """Until `process` itself listens on `port` (the others on the port answer for it)."""
    import psutil

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{process.args!r} exited with {process.returncode}")
        found = psutil.Process(process.pid)
        sockets = getattr(found, "net_connections", found.connections)(kind="tcp")
        if any(s.status == psutil.CONN_LISTEN and s.laddr.port == port for s in sockets):
            return
        time.sleep(0.05)
    raise TimeoutError(f"{process.args!r} did not listen on {port} in {timeout_s} s")


# ------------------------------------------------------------------------------- churn


def churn(args: argparse.Namespace, count: int) -> list[dict[str, Any]]:
    """`churn.py` with `count` workers on the server cores and its clients on the others."""
    split = Split.of(count, sorted(os.sched_getaffinity(0)))
    command = [sys.executable, str(BENCHMARKS / "churn.py"), "--workers", str(count)]
    command += ["--server-cpus", split.taskset("server"), "--client-cpus", split.taskset("load")]
    command += ["--duration", str(args.churn_duration), *args.churn_arg]
    timeout_s = 4 * args.churn_duration + 600  # the first run builds the store too
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=True)
    path = next(x for x in done.stdout.splitlines() if x.startswith("raw results: "))
    results = json.loads(Path(path.removeprefix("raw results: ")).read_text())
    row = {"server_cores": count, "load_cores": len(split.load), "model": "churn"}
    row = {**row, "connections": results["args"]["clients"]}
    rows = [{**row, "server": "modelhost", "fronts": 1, **_churn_row(results["modelhost"])}]
    if "floor" in results:
        rows.append({**row, "server": "floor (one process)", **_churn_row(results["floor"])})
    return rows


def _churn_row(result: dict[str, Any]) -> dict[str, Any]:
    """churn.py's figures in this table's terms: p99 of the hits, CPU from its frontend's."""
    cpu = result.get("cpu_ms_per_request") or {}
    total_ms = cpu.get("frontend", 0.0) + cpu.get("workers", 0.0)
    return {
        "requests_per_s": result["throughput_rps"],
        "latency_ms": {"p99": result["hit_p99_ms"]},
        "error_count": result["errors"],
        "frontend_share": cpu["frontend"] / total_ms if total_ms else None,
        "frontend_us_per_request": cpu["frontend"] * 1000 if cpu else None,
        "churn": result,
    }


# ------------------------------------------------------------------------------- report


def report(rows: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    table = markdown_table(HEADER, [_table_row(row) for row in rows])
    ratios = markdown_table(
        ["server cores", "model", "fronts", "modelhost ÷ floor", "modelhost ÷ its own on 1 core"],
        ratio_rows(rows),
    )
    text = f"{table}\n\n{ratios}"
    path = write_results("cores", {**settings, "runs": rows}, text)
    print(f"{text}\n\nraw results: {path}")


def _table_row(row: dict[str, Any]) -> list[Any]:
    if "skipped" in row:
        skipped = row["skipped"].split(":")[0]
        cells = [row["server_cores"], "", row["server"], row.get("fronts", ""), row["model"]]
        return [*cells, "", skipped, "", "", "", ""]
    share = row.get("frontend_share")
    return [
        row["server_cores"],
        row["load_cores"],
        row["server"],
        row.get("fronts", ""),
        row["model"],
        row["connections"],
        row["requests_per_s"],
        row["latency_ms"]["p99"],
        "" if share is None else f"{share:.0%}",
        row.get("frontend_us_per_request") or "",
        row["error_count"],
    ]


def ratio_rows(rows: list[dict[str, Any]]) -> list[list[Any]]:
    """modelhost's throughput against the floor's at the same cores, and against its own (one
    front) on the fewest cores run."""
    rate = {
        (row["server_cores"], row["server"].split()[0], row["model"], row.get("fronts", 1)): row[
            "requests_per_s"
        ]
        for row in rows
        if "skipped" not in row
    }
    out = []
    for cores, server, model, fronts in sorted(rate):
        if server != "modelhost":
            continue
        floor = rate.get((cores, "floor", model, 1))
        ones = [c for c, s, m, f in rate if s == server and m == model and f == 1]
        mine = rate[(cores, server, model, fronts)]
        own = f"{mine / rate[(min(ones), server, model, 1)]:.2f}×" if ones else ""
        ratio = f"{mine / floor:.2f}×" if floor else ""
        out.append([cores, model, fronts, ratio, own])
    return out


if __name__ == "__main__":
    main()
