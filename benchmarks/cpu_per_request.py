"""CPU time per request of each server process under load: robust where requests/s are not.

On a shared or noisy machine throughput moves with the neighbours; the CPU each process spends
per answered request moves much less. The server (pinned to core 1) is loaded by wrk (core 0);
while wrk runs, each process's CPU time is read from /proc. Prints requests/s and µs of CPU per
request for every process of the server (modelhost: frontend, template, worker).

    python benchmarks/cpu_per_request.py --concurrency 1 16
    python benchmarks/cpu_per_request.py --servers modelhost --serve-arg=--batch-size --serve-arg=1
    python benchmarks/cpu_per_request.py --check     # exit 1: c=1 costs 15% more than recorded
    python benchmarks/cpu_per_request.py --record    # write the figure --check compares with
    python benchmarks/cpu_per_request.py --servers modelhost --without metrics  # its cost

The regression guard (`--check`, which `make bench` runs and CI does not: timing on a shared
machine is noise) measures modelhost alone at concurrency 1, `--runs` times, and compares the
median total CPU per request with benchmarks/cpu_per_request.json, recorded on a named machine
and date: a figure from another machine says little, so record one where you check.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
from _common import BENCHMARKS, add_wrk_run_args, machine, markdown_table
from hot_path import MODEL, SERVERS, _invoke_url, _start, ensure_wrk, wrk

from modelhost import testing

HEADER = ["server", "concurrency", "requests/s", "CPU µs/request by process", "total µs"]
RECORDED = BENCHMARKS / "cpu_per_request.json"
ALLOWED_GROWTH = 0.15  # --check fails above the recorded figure × 1.15


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    if args.check or args.record:
        sys.exit(_guard(args))
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


def _guard(args: argparse.Namespace) -> int:
    """Measure modelhost at c=1 `--runs` times; record the median, or check it (exit 1 when it
    grew more than 15% over the recorded figure)."""
    args.servers, args.concurrency = ["modelhost"], [1]
    totals = []
    with tempfile.TemporaryDirectory(prefix="modelhost-cpu-") as scratch:
        store = Path(scratch) / "store"
        testing.iris_logreg(store / MODEL)
        for run in range(args.runs):
            with _start("modelhost", store, Path(scratch) / f"run{run}", args) as running:
                url = _invoke_url("modelhost", running.url)
                wrk(url, 1, args.warmup, args.wrk_core)
                row = _measure(running.pid, url, 1, args)
                totals.append(float(row[-1].replace(",", "")))
                print(f"run {run + 1}: {row[0]} requests/s, {row[1]} = {row[2]} µs/request")
    measured = statistics.median(totals)
    if args.record:
        RECORDED.write_text(
            json.dumps(_record(measured, totals, args), indent=2, ensure_ascii=False) + "\n"
        )
        print(f"recorded {measured:.0f} µs/request in {RECORDED}")
        return 0
    return _compare(measured, json.loads(RECORDED.read_text()))


def _record(measured: float, totals: list[float], args: argparse.Namespace) -> dict[str, object]:
    return {
        "what": "modelhost CPU µs per request at concurrency 1, all processes, median of runs",
        "cpu_us_per_request": round(measured, 1),
        "runs": totals,
        "date": time.strftime("%Y-%m-%d"),
        "machine": machine(),
        "settings": {"duration_s": args.duration, "serve_args": args.serve_arg},
    }


def _compare(measured: float, recorded: dict[str, object]) -> int:
    figure = float(recorded["cpu_us_per_request"])  # type: ignore[arg-type]
    limit = figure * (1 + ALLOWED_GROWTH)
    where = f"recorded {figure:.0f} µs on {recorded['date']} ({recorded['machine']})"
    if measured > limit:
        print(f"FAIL: {measured:.0f} µs/request at c=1, over {limit:.0f} (+15%); {where}")
        return 1
    print(f"ok: {measured:.0f} µs/request at c=1, within {limit:.0f} (+15%); {where}")
    return 0


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
        "--servers",
        nargs="+",
        default=list(SERVERS),
        choices=SERVERS,
    )
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--check", action="store_true", help="fail when c=1 grew over 15%%")
    parser.add_argument("--record", action="store_true", help="record the c=1 figure")
    parser.add_argument("--runs", type=int, default=3, help="runs for --check and --record")
    parser.add_argument(
        "--without",
        choices=["nothing", "observer", "metrics"],
        help="switch a part of the observability off (benchmarks/serve_without.py)",
    )
    add_wrk_run_args(parser, duration_s=8, warmup_s=2)
    return parser.parse_args()


if __name__ == "__main__":
    main()
