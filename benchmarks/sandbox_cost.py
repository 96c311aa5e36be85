"""What the sandbox of `--refuse-pickle`'s workers costs: on a worker's start, a load and a hit.

In process, no server: the models are written by a child, the runtimes imported, and then a
worker is forked per round, as the template forks them; half the rounds confine it first
(modelhost/workers/sandbox.py), reading the models from its view (modelhost/workers/views.py).
Each worker loads and unloads every model `--cycles` times, then answers `--hits` one-row
requests per model through `Worker.infer`. Rounds alternate, so drift on a shared machine hits
both. Reported per model and mode: the medians of a load and of a hit, and a hit's p99; and, for
a sandboxed worker, the frontend's linking of the artifact into the view and out again, which
each load adds.

    python benchmarks/sandbox_cost.py
    python benchmarks/sandbox_cost.py --rounds 6 --cycles 40 --hits 5000
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import markdown_table, write_results

from modelhost import testing
from modelhost.workers.messages import Infer, Item, Load, Unload
from modelhost.workers.sandbox import Untrusted, support
from modelhost.workers.template import import_runtimes
from modelhost.workers.views import Views
from modelhost.workers.worker import Worker

BODY = json.dumps(testing.iris_rows(1)).encode()
MODELS = {
    "onnx": ("iris.onnx", testing.onnx_iris),
    "xgboost": ("iris.ubj", testing.xgboost_iris),
    "lightgbm": ("iris.txt", testing.lightgbm_iris),
    "torchscript": ("iris.pt", testing.torch_iris),
}


RUNTIMES = ["onnxruntime", "xgboost", "lightgbm", "torch"]


def write_models(root: Path) -> dict[str, Path]:
    """The models, written by a child: a runtime that has run its threads does not fork well."""
    command = [sys.executable, __file__, "--write-models", str(root)]
    subprocess.run(command, check=True, timeout=120)
    return {kind: root / name for kind, (name, _) in MODELS.items()}


def measure(worker: Worker, path: Path, cycles: int, hits: int) -> dict[str, list[float]]:
    loads, answers = [], []
    for _ in range(cycles):
        started = time.perf_counter()
        worker.load(Load(model="m", path=str(path)))
        loads.append((time.perf_counter() - started) * 1000)
        worker.unload(Unload("m"))
    worker.load(Load(model="m", path=str(path)))
    infer = Infer("m", (Item("application/json", "application/json", {}, len(BODY)),))
    for _ in range(hits):
        started = time.perf_counter()
        worker.infer(infer, BODY)
        answers.append((time.perf_counter() - started) * 1e6)
    worker.unload(Unload("m"))
    return {"load_ms": loads, "hit_us": answers}


def child(sandboxed: bool, models: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    """One worker's figures: its confinement's time, then each model's loads and hits."""
    ours, theirs = socket.socketpair()
    confine_ms = 0.0
    if sandboxed:  # the models in the view, as the frontend shows them
        views = Views(args.root)
        models = {k: Path(views.show(os.getpid(), k, str(p), None)[0]) for k, p in models.items()}
        started = time.perf_counter()
        refused = Untrusted(support(), str(views.root)).confine(args.root)
        confine_ms = (time.perf_counter() - started) * 1000
        assert not refused, refused
    worker = Worker(ours, 1, threads=1)
    figures = {kind: measure(worker, path, args.cycles, args.hits) for kind, path in models.items()}
    return {"confine_ms": confine_ms, "models": figures}


def in_fork(sandboxed: bool, models: dict[str, Path], args: argparse.Namespace) -> dict[str, Any]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        code = 1
        try:
            with os.fdopen(write, "w") as out:
                json.dump(child(sandboxed, models, args), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as answer:
        text = answer.read()
    os.waitpid(pid, 0)
    result: dict[str, Any] = json.loads(text)
    return result


def view_ms(models: dict[str, Path], args: argparse.Namespace) -> dict[str, float]:
    """Per model, the median of linking its artifact into a view and removing it again."""
    views, pid, medians = Views(args.root), 1, {}
    for kind, path in models.items():
        spent = []
        for _ in range(args.cycles):
            started = time.perf_counter()
            views.show(pid, kind, str(path), None)
            views.hide(pid, kind)
            spent.append((time.perf_counter() - started) * 1000)
        medians[kind] = statistics.median(spent)
    views.close()
    return medians


def p99(values: list[float]) -> float:
    return sorted(values)[int(len(values) * 0.99)]


def rows_of(runs: dict[bool, list[dict[str, Any]]], views: dict[str, float]) -> list[list[Any]]:
    rows = []
    for kind in MODELS:
        for sandboxed in (False, True):
            loads = [v for run in runs[sandboxed] for v in run["models"][kind]["load_ms"]]
            hits = [v for run in runs[sandboxed] for v in run["models"][kind]["hit_us"]]
            mode = "sandboxed" if sandboxed else "plain"
            load = round(statistics.median(loads), 2)
            view = round(views[kind], 3) if sandboxed else 0.0
            hit, hit_p99 = round(statistics.median(hits), 1), round(p99(hits), 1)
            rows.append([kind, mode, load, view, hit, hit_p99])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="workers per mode")
    parser.add_argument("--cycles", type=int, default=15, help="loads per model and worker")
    parser.add_argument("--hits", type=int, default=1000, help="hits per model and worker")
    parser.add_argument("--write-models", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_models:
        for name, make in MODELS.values():
            make(args.write_models / name)
        return
    if not support().available:
        raise SystemExit(f"no sandbox here: {support().missing}")
    args.root = Path(tempfile.mkdtemp(prefix="sandbox-cost-")).resolve()
    models = write_models(args.root)
    import_runtimes(RUNTIMES)  # as the template does before it forks
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    for _ in range(args.rounds):
        for sandboxed in (False, True):
            runs[sandboxed].append(in_fork(sandboxed, models, args))
    confine_ms = statistics.median(run["confine_ms"] for run in runs[True])
    views = view_ms(models, args)
    header = ["model", "worker", "load p50 (ms)", "view p50 (ms)", "hit p50 (µs)", "hit p99 (µs)"]
    table = markdown_table(header, rows_of(runs, views))
    settings = {key: str(value) for key, value in vars(args).items()}
    results = {"settings": settings, "confine_ms": confine_ms, "view_ms": views, "runs": runs}
    path = write_results("sandbox_cost", results, table)
    print(table)
    print(f"\na worker's confinement, once at its start: {confine_ms:.2f} ms (median)")
    print(f"raw results: {path}")


if __name__ == "__main__":
    main()
