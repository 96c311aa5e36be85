"""Where a miss's CPU goes on one core: modelhost's processes against the in-process floor.

A server with one worker, pinned to one core, has room for about two digits forests; one client
on another core asks for four copies of it in turn, so every request loads one model and evicts
another. The CPU its processes spent (/proc, user + system) per miss is set beside the floor's:
`joblib.load`, one predict and `del` of the previous model, in one process on the same core.
py-spy samples the worker and the frontend meanwhile, split into the phases of a miss: shares of
the samples in which a thread could run, so on one shared core a thread waiting for the core
counts too.

    python benchmarks/miss_cpu.py                 # 8 MiB forest, 60 misses, cores 0 and 1
    python benchmarks/miss_cpu.py --perf          # perf's symbols instead of py-spy's phases
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _common import (
    RESULTS,
    add_serve_arg,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    post_invoke,
    process_tree,
    write_results,
)
from churn import ROWS, alone_footprints, budget_of, build_store

MiB = 2**20
COPIES = 4  # of one forest, asked for in turn

# (phase, what a sampled frame names for it); a stack's phase is that of its frame nearest the
# leaf with any mark, earlier phases first (a predict runs inside joblib's Parallel)
PHASES = (
    ("predict", ("predict",)),
    ("footprint: gc.collect + mallinfo2", ("settled_memory", "allocated_bytes")),
    ("heap trim (malloc_trim)", ("trim_heap",)),
    ("peak RSS (clear_refs, status)", ("reset_peak_rss", "rss_and_peak_bytes")),
    ("read + unpickle", ("fast_copy.py", "load_handler", "numpy_pickle", "Unpickler", "pickle")),
    ("write the fast copy", ("_written",)),
    ("free the model", ("unload", "close")),
    ("PSS readings", ("pss_bytes", "smaps_rollup")),
    ("frames and wire", ("wire.py", "frames.py", "send", "FrameReader", "data_received")),
)


def profile(pid: int, seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """py-spy sampling `pid` into `out` (folded stacks), or None where py-spy is missing."""
    import sys

    spy = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if spy is None:
        return None
    command = [spy, "record", "--pid", str(pid), "--rate", "400", "--format", "raw"]
    command += ["--nonblocking", "--duration", str(int(seconds) + 1), "-o", str(out)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def phases(folded: Path) -> dict[str, float]:
    """The share of samples in each phase."""
    counts: Counter[str] = Counter()
    if not folded.exists():
        return {}
    for line in folded.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")[::-1]
        counts[phase_of(frames)] += int(count)
    total = sum(counts.values()) or 1
    return {phase: round(n / total, 3) for phase, n in counts.most_common()}


def phase_of(frames: list[str]) -> str:
    for phase, marks in PHASES:
        if any(mark in frame for frame in frames for mark in marks):
            return phase
    return "other"


def run_modelhost(store: Path, which: dict[str, int], args: Any, work: Path) -> dict[str, Any]:
    import httpx

    from modelhost import testing

    names = sorted(which)
    alone = alone_footprints(store, which, work, SimpleNamespace(workers=1))
    room_for_one = SimpleNamespace(room=1, workers=1, load_headroom=True)
    budget = budget_of(alone, room_for_one) + 6 * MiB  # the first load estimates more; not two
    serve = testing.serve_args(store, work / "cache", workers=1, memory_budget=budget)
    prefix = ("taskset", "-c", str(args.server_cpu))
    with testing.RunningServer([*serve, *args.serve_arg], work, prefix=prefix) as server:
        with httpx.Client(timeout=120) as client:
            for name in names:  # fast copies written, the server's first uses done
                post_invoke(client, server.url, name, ROWS)
            pids = process_tree(server.pid)
            worker = max(pids)  # forked last
            if args.perf:
                spies = [perf_record([pids[0], worker], args.seconds_hint, work / "perf.data")]
            else:
                spies = [profile(p, args.seconds_hint, work / f"{p}.folded") for p in pids[::-1]]
            time.sleep(0.5)
            before, began = cpu_seconds(pids), time.monotonic()
            answers = [
                post_invoke(client, server.url, names[i % len(names)], ROWS)
                for i in range(args.misses)
            ]
            spent, wall = cpu_spent(before), time.monotonic() - began
        for spy in spies:
            if spy is not None:
                spy.wait(timeout=args.seconds_hint + 30)
        evictions = server.events("evict")
    timings = [answer["server_timing_ms"] for answer in answers]
    return {
        "caches": dict(Counter(answer["cache"] for answer in answers)),
        "server_timing_p50_ms": {
            part: round(statistics.median(t.get(part, 0.0) for t in timings), 2)
            for part in sorted({part for t in timings for part in t})
        },
        "cpu_ms_per_miss": round(1000 * sum(spent.values()) / args.misses, 1),
        "frontend_cpu_ms_per_miss": round(1000 * spent.get(pids[0], 0.0) / args.misses, 1),
        "worker_cpu_ms_per_miss": round(1000 * spent.get(worker, 0.0) / args.misses, 1),
        "wall_ms_per_miss": round(1000 * wall / args.misses, 1),
        "evict_ms": sorted(e.get("duration_ms", 0) for e in evictions),
        "worker_phases": phases(work / f"{worker}.folded"),
        "frontend_phases": phases(work / f"{pids[0]}.folded"),
        "perf_top": perf_top(work / "perf.data") if args.perf else "",
    }


def perf_record(pids: list[int], seconds: float, out: Path) -> subprocess.Popen[bytes] | None:
    """`perf record` of `pids` for `seconds`, or None where perf is missing."""
    if shutil.which("perf") is None:
        return None
    command = ["perf", "record", "-F", "999", "-p", ",".join(map(str, pids)), "-o", str(out)]
    command += ["--", "sleep", str(seconds)]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def perf_top(data: Path) -> str:
    """The symbols over 1% of the samples, by process."""
    if not data.exists():
        return "(no perf samples)"
    command = ["perf", "report", "-i", str(data), "--stdio", "--sort", "pid,dso,sym"]
    command += ["-g", "none", "--percent-limit", "1"]
    report = subprocess.run(command, capture_output=True, text=True).stdout
    return "\n".join(line for line in report.splitlines() if line and not line.startswith("#"))


def run_floor(store: Path, names: list[str], args: Any) -> dict[str, Any]:
    """joblib.load, one predict and `del` of the previous model, on the server's core."""
    script = f"""
import os, sys, time, joblib
from modelhost import testing
os.sched_setaffinity(0, {{{args.server_cpu}}})
rows, names, model = testing.digits_rows(3), {names!r}, None
for i in range(4 + {args.misses}):
    if i == 4:
        began, cpu = time.monotonic(), time.process_time()
    del model
    model = joblib.load({str(store)!r} + "/" + names[i % len(names)])
    model.predict_proba(rows)
n = {args.misses}
print((time.process_time() - cpu) * 1000 / n, (time.monotonic() - began) * 1000 / n)
"""
    import sys

    output = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    cpu_ms, wall_ms = (float(x) for x in output.stdout.split())
    return {"cpu_ms_per_miss": round(cpu_ms, 1), "wall_ms_per_miss": round(wall_ms, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact-mib", type=float, default=8.0, help="the forest's file")
    parser.add_argument("--misses", type=int, default=60)
    parser.add_argument("--seconds-hint", type=float, default=20.0, help="py-spy's duration")
    parser.add_argument("--server-cpu", type=int, default=0)
    parser.add_argument("--client-cpu", type=int, default=1)
    parser.add_argument("--perf", action="store_true", help="perf record instead of py-spy")
    add_serve_arg(parser)
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.client_cpu})
    from modelhost import testing

    ROWS.extend(testing.digits_rows(3))
    store = RESULTS / f".miss-cpu-store-{COPIES}x{args.artifact_mib:g}MiB"
    store.mkdir(parents=True, exist_ok=True)
    which = build_store(store, COPIES, 1, args.artifact_mib)
    work = Path(tempfile.mkdtemp(prefix="miss-cpu-"))
    results = {"args": vars(args), "modelhost": run_modelhost(store, which, args, work)}
    results["floor"] = run_floor(store, sorted(which), args)
    path = write_results("miss_cpu", results, report(results))
    print(report(results))
    print(f"\nraw results: {path}")


def report(results: dict[str, Any]) -> str:
    mh, floor = results["modelhost"], results["floor"]
    rows = [
        ["modelhost", mh["cpu_ms_per_miss"], mh["wall_ms_per_miss"]],
        [
            "floor (joblib.load + predict + del)",
            floor["cpu_ms_per_miss"],
            floor["wall_ms_per_miss"],
        ],
    ]
    evict = mh["evict_ms"]
    lines = [
        markdown_table(["", "CPU ms per miss", "wall ms per miss"], rows),
        "",
        f"modelhost: frontend {mh['frontend_cpu_ms_per_miss']} ms, worker "
        f"{mh['worker_cpu_ms_per_miss']} ms of CPU per miss; caches {mh['caches']}; "
        f"evictions p50 {evict[len(evict) // 2] if evict else None} ms; Server-Timing p50 "
        f"{mh['server_timing_p50_ms']}",
        f"worker's samples by phase: {mh['worker_phases']}",
        f"frontend's samples by phase: {mh['frontend_phases']}",
        mh["perf_top"],
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
