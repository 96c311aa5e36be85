"""What a load costs from each format a worker may read a scikit-learn model from, in one process:
the artifact through `joblib.load`, and its fast copy (a protocol-5 pickle, `cache/fast_copies`)
through the C unpickler; and an unload and reload with the heap trimmed between them (as a
worker does) or kept (what refilling pages the OS took back costs; see docs/decisions.md).
Medians of `--repeats`; footprints and peaks as the worker measures them (allocated bytes; the
resident set's high-water mark).

    python benchmarks/load_formats.py                 # the churn benchmark's 8 MiB forest
    python benchmarks/load_formats.py --artifact-mib 2
"""

from __future__ import annotations

import argparse
import gc
import pickle
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _common import markdown_table, write_results

MiB = 2**20


def timed(load: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        load()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def measured(load: Callable[[], Any]) -> tuple[int, int]:
    """(footprint, peak) of one load, as `Worker.load` measures them."""
    from modelhost.records.memory import reset_peak_rss, rss_and_peak_bytes, trim_heap
    from modelhost.workers.worker import settled_memory

    trim_heap()
    before = settled_memory()
    reset_peak_rss()
    rss_before, _ = rss_and_peak_bytes()
    model = load()
    footprint = settled_memory() - before
    peak = rss_and_peak_bytes()[1] - rss_before
    del model
    return footprint, peak


def reload_ms(load: Callable[[], Any], resident: list[Any], trim: bool, repeats: int) -> float:
    """Unload the oldest of `resident` and load another, trimming the heap between or not."""
    from modelhost.records.memory import trim_heap

    def cycle() -> None:
        resident.pop(0)
        gc.collect()
        if trim:
            trim_heap()
        resident.append(load())
        trim_heap()  # the load's own trim, in both cases

    return timed(cycle, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact-mib", type=float, default=8.0)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--resident", type=int, default=8, help="models loaded beside")
    args = parser.parse_args()

    import joblib

    from modelhost import testing

    work = Path(tempfile.mkdtemp(prefix="load-formats-"))
    artifact = testing.random_forest(work / "forest.joblib", int(args.artifact_mib * MiB))
    copy = work / "forest.pickle"
    copy.write_bytes(pickle.dumps(joblib.load(artifact), protocol=5))
    gc.freeze()  # as the template does: a collection then sees only the models

    def from_copy() -> Any:
        with copy.open("rb") as file:
            return pickle.load(file)

    def from_artifact() -> Any:
        return joblib.load(artifact)

    rows = []
    for label, load, path in (
        ("joblib.load", from_artifact, artifact),
        ("fast copy", from_copy, copy),
    ):
        footprint, peak = measured(load)
        rows.append(
            [label, path.stat().st_size, round(timed(load, args.repeats), 2), footprint, peak]
        )
    resident = [from_copy() for _ in range(args.resident)]
    trimmed = reload_ms(from_copy, resident, trim=True, repeats=args.repeats)
    kept = reload_ms(from_copy, resident, trim=False, repeats=args.repeats)
    table = markdown_table(["format", "file bytes", "load ms", "footprint", "peak"], rows)
    report = "\n".join(
        [
            table,
            "",
            f"unload + reload from the fast copy beside {args.resident} loaded: "
            f"{trimmed:.2f} ms with the heap trimmed between, {kept:.2f} ms with it kept",
        ]
    )
    results = {
        "args": vars(args),
        "rows": rows,
        "reload_trimmed_ms": trimmed,
        "reload_kept_ms": kept,
    }
    path = write_results("load-formats", results, report)
    print(report)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
