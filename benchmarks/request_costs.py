"""Where one request's time goes, per process: CPU, context switches and system calls per request.

The server (modelhost by default, or a floor: `--server`; pinned to core 1, `--workers 1`) is
loaded by wrk (core 0) at one concurrency. For each process of the server (frontend, template,
worker; the boundary floor's model process is its worker) it reports, per answered request: CPU µs
(user and system, from /proc), voluntary and involuntary context switches (all threads, from
/proc/PID/task/*/status) and, with `--strace`, system calls by name (`strace -c -f`, attached for
a run of its own: strace slows the server, but not what it calls per request). `--perf` splits
the frontend's and the worker's CPU by shared object (the kernel, the interpreter, uvloop,
httptools, numpy...), from `perf record` samples over a run of its own: where Python and C
extensions are told apart. `--py-spy DIR` also writes a py-spy profile (`--native`, raw collapsed
stacks) of the frontend and the worker.

    python benchmarks/request_costs.py --concurrency 1 --strace --perf
    python benchmarks/request_costs.py --server boundary-floor --perf
    python benchmarks/request_costs.py --py-spy /tmp/profiles --serve-arg=--access-log=/dev/null
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
from _common import add_wrk_run_args, markdown_table
from hot_path import MODEL, SERVERS, _invoke_url, _start, ensure_wrk, wrk

from modelhost import testing

BATCHED = ("modelhost_batches_total", "modelhost_batched_requests_total")
HEADER = ["process", "CPU µs/request", "voluntary switches", "involuntary switches"]


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="modelhost-costs-") as scratch:
        store = Path(scratch) / "store"
        testing.iris_logreg(store / MODEL)
        with _start(args.server, store, Path(scratch) / args.server, args) as running:
            url = _invoke_url(args.server, running.url)
            processes = _processes(running.pid)
            wrk(url, args.concurrency, args.warmup, args.wrk_core)
            print(markdown_table(HEADER, _counters(processes, url, args)))
            if args.strace:
                print()
                print(_syscalls(processes, url, args))
            if args.perf:
                print()
                print(_by_shared_object(processes, url, args))
            if args.py_spy:
                _profile(processes, url, args)


def _processes(pid: int) -> dict[str, psutil.Process]:
    """frontend, its fronts (`--fronts`), template and workers, by role (modelhost's workers are
    the template's children; the boundary floor's model process is the frontend's only child)."""
    frontend = psutil.Process(pid)
    children = frontend.children(recursive=True)
    named = {"frontend": frontend}
    for child in children:
        if "modelhost.fronts" in " ".join(child.cmdline()):
            role = "front"
        else:
            role = "worker" if child.ppid() != pid or len(children) == 1 else "template"
        named[_numbered(role, named)] = child
    return named


def _numbered(role: str, named: dict[str, psutil.Process]) -> str:
    """`role`, or `role N` for the Nth process of a role held by several."""
    count = sum(1 for name in named if name.split()[0] == role)
    return f"{role} {count + 1}" if count else role


def _switches(process: psutil.Process) -> tuple[int, int]:
    voluntary = involuntary = 0
    for task in Path(f"/proc/{process.pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            for line in (task / "status").read_text().splitlines():
                if line.startswith("voluntary_ctxt_switches"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    involuntary += int(line.split()[1])
    return voluntary, involuntary


def _batched(invoke_url: str) -> tuple[float, float]:
    """modelhost's batches and the requests in them so far; zeros where there are no metrics."""
    base = invoke_url.split("/models/")[0]
    try:
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
            text = response.read().decode()
    except (OSError, ValueError):
        return 0.0, 0.0
    counts = dict(line.split()[:2] for line in text.splitlines() if line.startswith(BATCHED))
    return float(counts.get(BATCHED[0], 0)), float(counts.get(BATCHED[1], 0))


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _counters(
    processes: dict[str, psutil.Process], url: str, args: argparse.Namespace
) -> list[list[str]]:
    before = {name: (_cpu_s(p), *_switches(p)) for name, p in processes.items()}
    batched_before = _batched(url)
    result = wrk(url, args.concurrency, args.duration, args.wrk_core)
    after = {name: (_cpu_s(p), *_switches(p)) for name, p in processes.items()}
    batched = [a - b for a, b in zip(_batched(url), batched_before, strict=True)]
    answered = result["requests"]
    print(f"{answered} requests, {result['requests_per_s']:,.0f}/s at c={args.concurrency}")
    if batched[0]:  # modelhost's own batches, from its metrics
        print(f"{batched[1] / batched[0]:.2f} requests a batch")
    rows = []
    fronts = [name for name in processes if name.startswith("front ") or name == "front"]
    if fronts:  # the frontend's CPU in all: the main process's and its fronts'
        names = ["frontend", *fronts]
        for counts in (after, before):
            counts["frontend and fronts"] = tuple(
                map(sum, zip(*map(counts.get, names), strict=True))
            )
    for name in [*processes, *(["frontend and fronts"] if fronts else [])]:
        spent = zip(after[name], before[name], strict=True)
        cpu, voluntary, involuntary = (a - b for a, b in spent)
        rows.append(
            [
                name,
                f"{cpu / answered * 1e6:,.0f}",
                f"{voluntary / answered:.2f}",
                f"{involuntary / answered:.2f}",
            ]
        )
    return rows


def _syscalls(processes: dict[str, psutil.Process], url: str, args: argparse.Namespace) -> str:
    """System calls per request by name, strace attached to each process while wrk runs."""
    if not shutil.which("strace"):
        return "(strace is not installed)"
    with tempfile.TemporaryDirectory() as scratch:
        outputs = {name: Path(scratch) / f"{name}.txt" for name in processes}
        tracers = [
            ["strace", "-c", "-f", "-p", str(p.pid), "-o", str(outputs[n])]
            for n, p in processes.items()
        ]
        with _attached(tracers, args.wrk_core):
            answered = wrk(url, args.concurrency, args.duration, args.wrk_core)["requests"]
        counts = {name: _strace_counts(path) for name, path in outputs.items()}
    names = sorted({call for calls in counts.values() for call in calls})
    rows = [
        [call, *(f"{counts[p].get(call, 0) / answered:.2f}" for p in processes)]
        for call in names
        if any(counts[p].get(call, 0) >= answered / 100 for p in processes)  # 0.01 or more
    ]
    rows.append(["total", *(f"{sum(counts[p].values()) / answered:.2f}" for p in processes)])
    return markdown_table(["system call (per request)", *processes], rows)


@contextlib.contextmanager
def _attached(commands: list[list[str]], core: str) -> Iterator[None]:
    """Tools that attach to the server's processes (strace, perf record), run on `core` while
    the block runs and stopped with SIGINT after it, when they write what they saw."""
    tools = [
        subprocess.Popen(
            ["taskset", "-c", core, *command],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for command in commands
    ]
    threading.Event().wait(1.0)  # attached to every thread before the load starts
    try:
        yield
    finally:
        for tool in tools:
            tool.send_signal(signal.SIGINT)
        for tool in tools:
            tool.wait(30)


def _strace_counts(path: Path) -> collections.Counter[str]:
    counts: collections.Counter[str] = collections.Counter()
    for line in path.read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            counts[fields[-1]] += int(fields[3])
    return counts


PERF_HZ = 4000  # samples a second of a process's CPU time: one stands for 250 µs of it


def _by_shared_object(
    processes: dict[str, psutil.Process], url: str, args: argparse.Namespace
) -> str:
    """CPU µs per request of the frontend and the worker by shared object, from perf samples
    (perf's own cost is in them: compare servers measured the same way, not with `_counters`)."""
    if not shutil.which("perf"):
        return "(perf is not installed)"
    roles = [role for role in ("frontend", "worker") if role in processes]  # the floor: one
    with tempfile.TemporaryDirectory() as scratch:
        data = {role: Path(scratch) / f"{role}.data" for role in roles}
        recorders = [
            ["perf", "record", "-F", str(PERF_HZ), "-p", str(processes[r].pid), "-o", str(data[r])]
            for r in roles
        ]
        with _attached(recorders, args.wrk_core):  # idle time has no samples
            answered = wrk(url, args.concurrency, args.duration, args.wrk_core)["requests"]
        samples = {role: _samples_by_object(data[role]) for role in roles}
    per_request = {
        role: {name: n * 1e6 / PERF_HZ / answered for name, n in counts.items()}
        for role, counts in samples.items()
    }
    names = sorted(
        {name for costs in per_request.values() for name, us in costs.items() if us >= 0.5},
        key=lambda name: -sum(costs.get(name, 0) for costs in per_request.values()),
    )
    rows = [[name, *(f"{per_request[r].get(name, 0):.1f}" for r in roles)] for name in names]
    rows.append(["total", *(f"{sum(per_request[r].values()):.1f}" for r in roles)])
    return markdown_table(["shared object (CPU µs per request, under perf)", *roles], rows)


def _samples_by_object(data: Path) -> collections.Counter[str]:
    report = subprocess.run(
        ["perf", "report", "-i", str(data), "--stdio", "--sort", "dso", "-g", "none", "-n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: collections.Counter[str] = collections.Counter()
    for line in report.splitlines():
        fields = line.split()  # "  55.06%   9333  libpython3.11.so.1.0"
        if len(fields) == 3 and fields[0].endswith("%") and fields[1].isdigit():
            counts[fields[2]] += int(fields[1])
    return counts


def _profile(processes: dict[str, psutil.Process], url: str, args: argparse.Namespace) -> None:
    out = Path(args.py_spy)
    out.mkdir(parents=True, exist_ok=True)
    spy = str(Path(sys.executable).with_name("py-spy"))
    recorders = [
        subprocess.Popen(
            [
                *("taskset", "-c", args.wrk_core, spy, "record", "--native", "-r", "500"),
                *("-d", str(args.duration), "-f", "raw", "-p", str(processes[name].pid)),
                *("-o", str(out / f"{name}.raw")),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for name in ("frontend", "worker")
    ]
    wrk(url, args.concurrency, args.duration + 2, args.wrk_core)
    for recorder in recorders:
        recorder.wait(60)
    print(f"\npy-spy profiles (raw collapsed stacks): {out}/frontend.raw, {out}/worker.raw")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="modelhost", choices=SERVERS)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--strace", action="store_true", help="count system calls per request")
    parser.add_argument("--perf", action="store_true", help="CPU by shared object (perf)")
    parser.add_argument("--py-spy", metavar="DIR", help="write py-spy profiles to DIR")
    add_wrk_run_args(parser, duration_s=8, warmup_s=2)
    return parser.parse_args()


if __name__ == "__main__":
    main()
