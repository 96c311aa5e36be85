"""A worker's load and unload of one model, beside N models it has loaded.

In process, no server: the worker's own `load` and `unload` (the footprint readings, collections
and trims included), with the collector frozen after the imports as the template freezes it.
N small digits forests are loaded first (many objects each, as trees are); then a probe forest
is loaded and unloaded `--cycles` times. Reported: the medians of a load and an unload, the time
the worker's loader thread holds the GIL, so a hit on that worker waits beside it.

    python benchmarks/worker_load_cost.py                      # N = 0, 100, 1,000
    python benchmarks/worker_load_cost.py --loaded 0 3000 --cycles 50
"""

from __future__ import annotations

import argparse
import gc
import socket
import statistics
import tempfile
import time
from pathlib import Path

from _common import markdown_table, write_results

from modelhost import testing
from modelhost.workers.messages import Load, Unload
from modelhost.workers.worker import Worker

KiB = 2**10


def cycle_ms(worker: Worker, probe: Path, cycles: int) -> tuple[float, float]:
    loads, unloads = [], []
    for _ in range(cycles):
        started = time.perf_counter()
        worker.load(Load(model="probe", path=str(probe)))
        loads.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        worker.unload(Unload("probe"))
        unloads.append((time.perf_counter() - started) * 1000)
    return statistics.median(loads), statistics.median(unloads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loaded", type=int, nargs="+", default=[0, 100, 1000])
    parser.add_argument("--forest-kib", type=int, default=256, help="each forest's file")
    parser.add_argument("--cycles", type=int, default=30)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="worker-load-cost-"))
    forest = testing.random_forest(root / "forest.joblib", args.forest_kib * KiB, seed=0)
    probe = testing.random_forest(root / "probe.joblib", args.forest_kib * KiB, seed=1)
    gc.collect()
    gc.freeze()  # as modelhost/workers/template.py leaves the worker
    ours, theirs = socket.socketpair()
    worker, rows = Worker(ours, 1, threads=1), []
    for loaded in sorted(args.loaded):
        while len(worker.models) < loaded:
            worker.load(Load(model=f"m{len(worker.models)}", path=str(forest)))
        load_ms, unload_ms = cycle_ms(worker, probe, args.cycles)
        rows.append([loaded, len(gc.get_objects()), round(load_ms, 2), round(unload_ms, 2)])
        print(rows[-1], flush=True)
    header = ["forests loaded", "objects the collector tracks", "load p50 (ms)", "unload p50 (ms)"]
    table = markdown_table(header, rows)
    path = write_results("worker_load_cost", {"settings": vars(args), "rows": rows}, table)
    print(table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
