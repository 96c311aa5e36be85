"""The frontend's CPU a hot request, before and after the server has served N other names.

A store of one iris model hard-linked under N + `--hot` names (`n/<i>.joblib`). One server
(`--workers 2`): wrk sends the hot set in turn at `--concurrency` for `--duration` seconds, the
frontend's CPU is read from /proc; then each of the N other names is invoked once (a miss each,
by `--seed-clients` clients); then the hot set again. A frontend whose per-request work grows
with the names it has seen shows it here, where `hot_path.py` serves one name and `scale.py`'s
hits are latency-bound. `--pythonpath DIR` serves another checkout's package (a `git archive`).
`--bytecodes` serves under count_bytecodes.py and tells which functions run more bytecodes a hot
request after the N names than before (the server is then about ten times slower); `--gc`, the
frontend's garbage collections a hot request (gc_probe/sitecustomize.py in the server).

    python benchmarks/many_names_hot.py [--names 40000] [--hot 100] [--duration 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from _common import BENCHMARKS, cpu_seconds, markdown_table, write_results
from frontend_instructions import Bytecodes, _differences, a_request
from hot_path import parse_wrk

from modelhost import testing

ROW = [5.1, 3.5, 1.4, 0.2]  # post.lua's
PROBE_WRITE_S = 0.5  # gc_probe's
# post.lua's body, headers and summary, with each request to the next of the hot set
ROTATE = """
dofile("{post}")
local i = 0
request = function()
   i = (i + 1) % {hot}
   return wrk.format(nil, "/models/n/" .. i .. ".joblib/invoke")
end
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, default=40_000)
    parser.add_argument("--hot", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--seed-clients", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1, help="hot rounds before and after")
    parser.add_argument("--idle", type=float, default=5, help="seconds idle before each round")
    parser.add_argument("--pythonpath", default="", help="a checkout to serve (PYTHONPATH)")
    parser.add_argument("--bytecodes", action="store_true", help="count bytecodes by function")
    parser.add_argument("--gc", action="store_true", help="time the frontend's collections")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-many-names-") as folder:
        rows = measure(Path(folder), args)
    table = markdown_table(
        [
            "names served before",
            "idle frontend CPU ms/s",
            "hot requests",
            "frontend µs a request",
            "of which collecting garbage",
        ],
        [
            [
                f"{r['names']:,}",
                f"{r['idle_ms_a_s']:.0f}",
                r["requests"],
                f"{r['frontend_us']:.0f}",
                f"{r['gc_us']:.2f}" if "gc_us" in r else "",
            ]
            for r in rows
        ],
    )
    if args.bytecodes:
        runs = [{"variant": f"{r['names']:,} names", **r} for r in rows]
        table += "\n\n" + _differences(runs, runs[0]["variant"], runs[-1]["variant"])
    print(table)
    write_results("many-names-hot", {**vars(args), "rows": rows}, table)


def measure(folder: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    store = folder / "store"
    first = testing.iris_logreg(store / "iris.joblib")
    (store / "n").mkdir()
    for index in range(args.hot + args.names):
        os.link(first, store / "n" / f"{index}.joblib")
    script = folder / "rotate.lua"
    script.write_text(ROTATE.format(post=BENCHMARKS / "post.lua", hot=args.hot))
    paths = [str(BENCHMARKS / "gc_probe")] if args.gc else []
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([*paths, args.pythonpath or str(BENCHMARKS.parent)]),
        "GC_PROBE": str(folder) if args.gc else "",
    }
    probe = folder if args.gc else None
    serve_args = testing.serve_args(store, folder / "cache", workers=2, preload_runtimes="sklearn")
    control = folder / "bytecodes"
    counter = [sys.executable, str(BENCHMARKS / "count_bytecodes.py"), str(control)]
    command = [*counter, "modelhost", "serve"] if args.bytecodes else None
    counts = Bytecodes(control) if args.bytecodes else None
    if counts is not None:
        control.mkdir()
    # not from a checkout's folder: `python -m` would import its package before PYTHONPATH's
    with testing.RunningServer(
        serve_args, folder, env=env, cwd=folder, command=command, startup_timeout_s=300
    ) as server:
        asyncio.run(invoke_each(server.url, range(args.hot), args.hot))  # loaded, not measured
        rows = [hot_round(server, script, 0, args, counts, probe) for _ in range(args.rounds)]
        others = range(args.hot, args.hot + args.names)
        asyncio.run(invoke_each(server.url, others, args.seed_clients))
        rows += [
            hot_round(server, script, args.names, args, counts, probe) for _ in range(args.rounds)
        ]
    return rows


def idle_ms_a_s(pid: int, seconds: float) -> float:
    """The frontend's CPU a second while no request comes: work of its own, not a request's."""
    before = cpu_s(pid)
    time.sleep(seconds)
    return (cpu_s(pid) - before) / seconds * 1000


def hot_round(
    server: testing.RunningServer,
    script: Path,
    names: int,
    args: argparse.Namespace,
    counts: Bytecodes | None,
    probe: Path | None,
) -> dict[str, Any]:
    """The frontend's CPU while idle, then a request's under wrk over the hot set (warmed 2 s);
    with `counts`, its bytecodes a request by function too (warmed first, then the idle span
    counted, whose share is taken off the loaded one's)."""
    if counts is not None:
        wrk(server.url, script, args.concurrency, 2)
        counts.start(server.pid)
    idle = idle_ms_a_s(server.pid, args.idle)
    if counts is None:
        wrk(server.url, script, args.concurrency, 2)
    else:
        counts.mark(server.pid)
    collected = collecting_s(probe, server.pid) if probe else 0.0
    before = cpu_s(server.pid)
    summary = wrk(server.url, script, args.concurrency, args.duration)
    requests = summary["requests"]
    row = {
        "names": names,
        "requests": requests,
        "frontend_us": (cpu_s(server.pid) - before) / requests * 1e6,
        "errors": summary["errors"],
        "idle_ms_a_s": idle,
    }
    if probe:
        row["gc_us"] = (collecting_s(probe, server.pid) - collected) / requests * 1e6
    if counts is not None:
        counts.mark(server.pid)
        counts.stop(server.pid)
        row["by_function"] = a_request(*counts.spans(), args.duration / args.idle, requests)
    return row


def collecting_s(probe: Path, pid: int) -> float:
    """The frontend's seconds in garbage collections so far, as gc_probe last wrote them."""
    time.sleep(2 * PROBE_WRITE_S)  # the probe's next write
    written = json.loads((probe / f"gc-{pid}.json").read_text())
    return sum(seconds for _, seconds in written.values())


def wrk(url: str, script: Path, connections: int, seconds: int) -> dict[str, Any]:
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", str(script), url]
    return parse_wrk(subprocess.run(command, capture_output=True, text=True, check=True).stdout)


def cpu_s(pid: int) -> float:
    return cpu_seconds([pid])[pid]


async def invoke_each(url: str, indexes: range, clients: int) -> None:
    """Invoke `n/<index>.joblib` once for each index, by `clients` at once; each must answer."""
    todo = iter(indexes)
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def one() -> None:
            for index in todo:
                response = await client.post(f"/models/n/{index}.joblib/invoke", json=ROW)
                response.raise_for_status()

        await asyncio.gather(*(one() for _ in range(clients)))


if __name__ == "__main__":
    main()
