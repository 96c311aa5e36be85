"""Where a direct hit's time goes under `--fronts N`, stage by stage, and each role's CPU.

modelhost serves iris with `--workers W --workers-per-model 0 --fronts F`, pinned to
--server-core, under wrk on --wrk-core. A `sitecustomize` put on the server's PYTHONPATH stamps
each batch a front sends to a worker's direct socket on both sides (CLOCK_MONOTONIC is one clock
for every process), so a batch's time splits into: waiting in the front behind the batch in
flight, the way to the worker's reader thread, the wait for a slot, the run, the reply's way back.
It also prints the CPU of the main process, the fronts and the workers over the measured run,
the main process's CPU to fold the fronts' reports a sample,
the server cores' idle share and wrk's CPU: a server that is not CPU-bound shows where it waits.

    python benchmarks/front_stages.py --workers 4 --fronts 3 --connections 48
    python benchmarks/front_stages.py --server-core 1-15 --wrk-core 0 --workers 15 --fronts 15 \
        --connections 240
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    add_wrk_run_args,
    cores,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    process_tree,
)
from hot_path import MODEL, ensure_wrk, wrk

from modelhost import testing

# imported by every process of the server (PYTHON* reaches the workers)
SITECUSTOMIZE = r"""
import json, os, socket, struct, threading, time

OUT = os.environ.get("PYTHON_FRONT_STAGES_OUT")
rows, dumping = [], [0]


def _dump_from(role):
    if dumping[0] == os.getpid():
        return
    dumping[0] = os.getpid()  # a forked worker: the template's rows and thread are not its own
    del rows[:]

    def dump():
        path = os.path.join(OUT, "%s-%d.json" % (role, os.getpid()))
        while True:
            time.sleep(0.3)
            with open(path + ".new", "w") as f:
                json.dump(rows[:], f)
            os.replace(path + ".new", path)

    threading.Thread(target=dump, daemon=True).start()


def _front():
    from modelhost.fronts import links

    asked, sent = {}, {}
    link = links.WorkerLink
    infer, send, received = link.infer, link._send, link.data_received

    def timed_infer(self, model, item, body, batch_size):
        _dump_from("front")
        outcome = infer(self, model, item, body, batch_size)
        asked[id(outcome)] = time.monotonic()
        return outcome

    def timed_send(self, model, batch_size):
        now, before = time.monotonic(), set(self.sent)
        send(self, model, batch_size)
        for request_id in set(self.sent) - before:
            waits = [now - asked.pop(id(w.outcome), now) for w in self.sent[request_id].waiting]
            worker = int(self.path.rsplit("-", 1)[1].split(".")[0])
            sent[(id(self), request_id)] = (worker, now, len(waits), sum(waits) / len(waits))

    def timed_received(self, data):
        now, before = time.monotonic(), set(self.sent)
        received(self, data)
        for request_id in before - set(self.sent):
            batch = sent.pop((id(self), request_id), None)
            if batch is not None:
                worker, at, size, wait = batch
                rows.append([worker, request_id, at, now, size, wait])

    links.WorkerLink.infer, links.WorkerLink._send = timed_infer, timed_send
    links.WorkerLink.data_received = timed_received


def _worker():
    from modelhost.workers import direct, worker
    from modelhost.workers.messages import encode
    from modelhost.workers.wire import Frame, FrameReader

    ran = threading.local()
    infer = worker.Worker.infer

    def timed_infer(self, request, payload):
        started = time.monotonic()
        answer = infer(self, request, payload)
        ran.span = (started, time.monotonic())
        return answer

    def timed_read(self, conn):  # Door._read, each step stamped
        _dump_from("worker")
        peer = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
        frames = FrameReader(conn)
        with conn:
            while True:
                try:
                    frame = frames.read()
                except (EOFError, OSError):
                    return
                read_at, ran.span = time.monotonic(), None
                reply, payload = self.answer(frame)
                answered_at = time.monotonic()
                data = direct.encode_frame(Frame(frame.request_id, encode(reply), payload))
                try:
                    conn.sendall(data)
                except OSError:
                    return
                written_at = time.monotonic()
                rows.append([peer, frame.request_id, read_at, ran.span, answered_at, written_at])

    worker.Worker.infer, direct.Door._read = timed_infer, timed_read


def _main():
    from modelhost.http import front_routes

    fold = front_routes.Routing.fold

    def timed_fold(self, report, front):
        _dump_from("fold")
        started = time.thread_time()
        fold(self, report, front)
        rows.append([time.monotonic(), time.thread_time() - started, len(report.samples)])

    front_routes.Routing.fold = timed_fold


if OUT:
    for patch in (_front, _worker, _main):
        try:
            patch()
        except ImportError:
            pass
"""

STAGES = [
    "front: behind the batch in flight",
    "front write → worker's reader thread",
    "worker: wait for a slot",
    "worker: run (its own batch or its group's)",
    "worker: answered → reply written",
    "reply written → front reads it",
    "round trip (front write → reply read)",
]


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    with tempfile.TemporaryDirectory(prefix="modelhost-stages-") as scratch:
        root = Path(scratch)
        testing.iris_logreg(root / "store" / MODEL)
        (root / "site").mkdir()
        (root / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
        result = _run(root, args)
    print(markdown_table(["role", "cores used", "CPU µs a request"], result["cpu"]))
    print(f"\n{result['summary']}; {result['fold']}\n")
    print(markdown_table(["stage", "batches", "mean µs", "p50 µs", "p99 µs"], result["stages"]))


def _run(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    out = root / "out"
    out.mkdir()
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHON_FRONT_STAGES_OUT": str(out)}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(root / "site"), os.environ.get("PYTHONPATH", "")) if p
    )
    serve = testing.serve_args(
        root / "store", out / "cache", workers=args.workers, workers_per_model=0, fronts=args.fronts
    )
    pin = ["taskset", "-c", args.server_core]
    with testing.RunningServer([*serve, *args.serve_arg], out, prefix=pin, env=env, cwd=out) as s:
        url = f"{s.url}/models/{MODEL}/invoke"
        wrk(url, args.connections, args.warmup, args.wrk_core)
        roles = _roles(s.pid)
        before, idle = cpu_seconds(list(roles)), _idle_s(args.server_core)
        wrk_before, started = _children_cpu_s(), time.monotonic()
        result = wrk(url, args.connections, args.duration, args.wrk_core)
        spent, idle = cpu_spent(before), _idle_s(args.server_core) - idle
        wrk_s, wall_s = _children_cpu_s() - wrk_before, time.monotonic() - started
        time.sleep(1.0)  # the last rows reach their files
    requests = result["requests"]
    server_cores = len(os.sched_getaffinity(0) & cores(args.server_core))
    summary = (
        f"{result['requests_per_s']:,.0f} req/s, p50 {result['latency_ms']['p50']:.1f} ms, "
        f"p99 {result['latency_ms']['p99']:.1f} ms; server cores idle {idle / wall_s:.2f} of "
        f"{server_cores}; wrk {wrk_s / wall_s:.2f} cores; errors {result['error_count']}"
    )
    return {
        "cpu": _cpu_rows(spent, roles, requests, wall_s),
        "summary": summary,
        "stages": _stage_rows(out, started),
        "fold": _fold_cost(out, started),
    }


def _roles(main: int) -> dict[int, str]:
    """Each process of the server: main, front, template, worker or other."""
    import psutil

    roles = {}
    for pid in process_tree(main):
        line = " ".join(psutil.Process(pid).cmdline())
        parent = psutil.Process(pid).ppid()
        if pid == main:
            roles[pid] = "main"
        elif "modelhost.fronts" in line:
            roles[pid] = "front"
        elif "modelhost.workers.template" in line:  # the workers are the template's children
            roles[pid] = "worker" if parent != main else "template"
        else:
            roles[pid] = "other"
    return roles


def _cpu_rows(
    spent: dict[int, float], roles: dict[int, str], requests: int, wall_s: float
) -> list[list[str]]:
    rows = []
    for role in ("main", "front", "worker", "template", "other"):
        seconds = sum(s for pid, s in spent.items() if roles[pid] == role)
        rows.append([role, f"{seconds / wall_s:.2f}", f"{seconds * 1e6 / max(1, requests):.0f}"])
    return rows


def _stage_rows(out: Path, since: float) -> list[list[str]]:
    """Each batch's stages, from the fronts' rows joined to the workers' by pid and id."""
    fronts = _rows(out, "front")
    workers = {(row[0], pid, row[1]): row for pid, row in _rows(out, "worker")}
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    for front, (worker, request_id, sent_at, replied_at, _size, wait_s) in fronts:
        seen = workers.get((front, worker, request_id))
        if seen is None or sent_at < since:
            continue
        _, _, read_at, span, answered_at, written_at = seen
        stages[STAGES[0]].append(wait_s)
        stages[STAGES[1]].append(read_at - sent_at)
        if span is not None and span[0] >= read_at:  # it ran its own batch or led a group
            stages[STAGES[2]].append(span[0] - read_at)
            stages[STAGES[3]].append(span[1] - span[0])
        stages[STAGES[4]].append(written_at - answered_at)
        stages[STAGES[5]].append(replied_at - written_at)
        stages[STAGES[6]].append(replied_at - sent_at)
    return [_stage_row(stage, values) for stage, values in stages.items()]


def _fold_cost(out: Path, since: float) -> str:
    """The main process's CPU to fold the fronts' reports, a sample."""
    folds = [row for _, row in _rows(out, "fold") if row[0] >= since]
    seconds, samples = sum(row[1] for row in folds), sum(row[2] for row in folds)
    return f"main folds {samples:,} samples at {seconds * 1e6 / max(1, samples):.1f} µs each"


def _stage_row(stage: str, values: list[float]) -> list[str]:
    if not values:
        return [stage, "0", "", "", ""]
    ordered = sorted(values)
    p50, p99 = ordered[len(ordered) // 2], ordered[int(len(ordered) * 0.99)]
    cells = [statistics.fmean(ordered), p50, p99]
    return [stage, str(len(ordered)), *(f"{value * 1e6:.0f}" for value in cells)]


def _rows(out: Path, role: str) -> list[tuple[int, list[Any]]]:
    return [
        (int(path.stem.rsplit("-", 1)[1]), row)
        for path in out.glob(f"{role}-*.json")
        for row in json.loads(path.read_text())
    ]


def _idle_s(spec: str) -> float:
    """Idle and iowait seconds of the cores in `spec` since boot."""
    ticks, wanted, total = os.sysconf("SC_CLK_TCK"), cores(spec), 0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *fields = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in wanted:
            total += int(fields[3]) + int(fields[4])
    return total / ticks


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--fronts", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    add_wrk_run_args(parser, duration_s=4, warmup_s=2)
    return parser.parse_args()


if __name__ == "__main__":
    main()
