"""Cold miss: time to the first prediction of a ~15 MB random forest.

(a) In a warm Python process (imports done, file in the page cache): `joblib.load` plus one
    predict, 5 times, median — the floor for any server.
(b) Against a running modelhost: for each of 5 copies of the forest under distinct names (so each
    is a miss from disk), the wall time of the first POST, with its `X-Modelhost-Cache` and the
    `load;dur=` part of its `Server-Timing`; then a second POST to the same model (a hit).

    python benchmarks/cold_miss.py [--copies 5] [--size-mib 15] [--serve-arg=--workers=2 ...]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from _common import (
    add_serve_arg,
    load_and_predict_ms,
    markdown_table,
    median,
    post_invoke,
    write_results,
)

from modelhost import testing

HEADER = ["scenario", "n", "median ms", "min ms", "max ms", "server load ms", "cache header"]


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-cold-miss-") as scratch:
        scratch_path = Path(scratch)
        forest = testing.random_forest(scratch_path / "forest.joblib", int(args.size_mib * 2**20))
        in_process = [
            load_and_predict_ms(forest, testing.digits_rows(1)) for _ in range(args.copies)
        ]
        store = scratch_path / "store"
        names = [f"forest-{i}.joblib" for i in range(args.copies)]
        for name in names:
            testing.copy_artifact(forest, store / name)
        testing.iris_logreg(store / "warmup.joblib")
        misses, hits = _against_modelhost(store, scratch_path, names, args.serve_arg)
        artifact_bytes = forest.stat().st_size
    rows = [
        ["joblib.load + predict, warm process", *_summary(in_process), "", ""],
        [
            "modelhost first request (miss)",
            *_summary([r["wall_ms"] for r in misses]),
            _load_ms(misses),
            _headers(misses),
        ],
        [
            "modelhost second request (hit)",
            *_summary([r["wall_ms"] for r in hits]),
            _load_ms(hits),
            _headers(hits),
        ],
    ]
    table = markdown_table(HEADER, rows)
    results = {
        "settings": vars(args),
        "artifact_bytes": artifact_bytes,
        "in_process_ms": in_process,
        "misses": misses,
        "hits": hits,
    }
    path = write_results("cold_miss", results, table)
    print(f"forest artifact: {artifact_bytes / 2**20:.1f} MiB\n\n{table}\n\nraw results: {path}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--size-mib", type=float, default=15.0)
    add_serve_arg(parser)
    return parser.parse_args()


def _against_modelhost(
    store: Path, scratch: Path, names: list[str], extra_args: list[str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    import httpx

    serve_args = ["--model-store", str(store), "--cache-dir", str(scratch / "cache"), *extra_args]
    with testing.RunningServer(serve_args, scratch) as server, httpx.Client(timeout=120) as client:
        post_invoke(
            client, server.url, "warmup.joblib", testing.iris_rows(1)
        )  # workers up and warm
        misses, hits = [], []
        for name in names:
            misses.append(post_invoke(client, server.url, name, testing.digits_rows(1)))
            hits.append(post_invoke(client, server.url, name, testing.digits_rows(1)))
        return misses, hits


def _summary(values_ms: list[float]) -> list[Any]:
    return [len(values_ms), median(values_ms), min(values_ms), max(values_ms)]


def _load_ms(results: list[dict[str, Any]]) -> float | str:
    loads = [r["server_timing_ms"]["load"] for r in results if "load" in r["server_timing_ms"]]
    return median(loads) if loads else "-"


def _headers(results: list[dict[str, Any]]) -> str:
    return ", ".join(sorted({str(r["cache"]) for r in results}))


if __name__ == "__main__":
    main()
