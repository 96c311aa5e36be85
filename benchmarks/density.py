"""Density: memory per loaded model, measured as proportional set size (PSS).

Start `modelhost serve --workers 2` with a large memory budget, wait idle 3 s, and sum PSS
(`Pss:` of /proc/<pid>/smaps_rollup) over the server and all its descendants: the idle figure.
Then invoke N copies of a ~15 MB random forest one at a time, measuring PSS after each, and
report PSS growth per model and models resident per GiB.

    python benchmarks/density.py [--models 20] [--size-mib 15] [--memory-budget 90%]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_serve_arg, markdown_table, median, write_results

from modelhost import testing

HEADER = [
    "workers",
    "models",
    "artifact MiB",
    "idle PSS MiB",
    "loaded PSS MiB",
    "PSS growth / model MiB",
    "median step MiB",
    "growth / artifact",
    "models per GiB",
]
MIB = 2**20


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-density-") as scratch:
        scratch_path = Path(scratch)
        forest = testing.random_forest(scratch_path / "forest.joblib", int(args.size_mib * MIB))
        names = [f"forest-{i:03d}.joblib" for i in range(args.models)]
        for name in names:
            testing.copy_artifact(forest, scratch_path / "store" / name)
        measured = _measure(scratch_path, names, args)
        artifact_bytes = forest.stat().st_size
    table = markdown_table(HEADER, [_row(args, artifact_bytes, measured)])
    results = {"settings": vars(args), "artifact_bytes": artifact_bytes, **measured}
    path = write_results("density", results, table)
    print(f"{table}\n\nraw results: {path}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--size-mib", type=float, default=15.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--memory-budget", default="90%")
    parser.add_argument("--idle-s", type=float, default=3.0)
    parser.add_argument(
        "--settle-s", type=float, default=0.5, help="pause after each load before reading PSS"
    )
    add_serve_arg(parser)
    return parser.parse_args()


def _measure(scratch: Path, names: list[str], args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    serve_args = [
        "--model-store",
        str(scratch / "store"),
        "--cache-dir",
        str(scratch / "cache"),
        "--workers",
        str(args.workers),
        "--memory-budget",
        args.memory_budget,
        *args.serve_arg,
    ]
    with testing.RunningServer(serve_args, scratch) as server, httpx.Client(timeout=120) as client:
        time.sleep(args.idle_s)
        idle = tree_pss_bytes(server.pid)
        steps = []
        for name in names:
            response = client.post(
                f"{server.url}/models/{name}/invoke", json=testing.digits_rows(1)
            )
            if response.status_code != 200:
                raise RuntimeError(f"POST {name} answered {response.status_code}: {response.text}")
            time.sleep(args.settle_s)
            steps.append(
                {
                    "model": name,
                    "cache": response.headers.get("x-modelhost-cache"),
                    "pss_bytes": tree_pss_bytes(server.pid),
                }
            )
        return {"idle_pss_bytes": idle, "steps": steps, "processes": _process_count(server.pid)}


def tree_pss_bytes(pid: int) -> int:
    """PSS of `pid` and all its descendants; processes that exit meanwhile count zero."""
    import psutil

    root = psutil.Process(pid)
    return sum(_pss_bytes(p.pid) for p in [root, *root.children(recursive=True)])


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return 0
    raise RuntimeError(f"no Pss: line in /proc/{pid}/smaps_rollup")


def _process_count(pid: int) -> int:
    import psutil

    return 1 + len(psutil.Process(pid).children(recursive=True))


def _row(args: argparse.Namespace, artifact_bytes: int, measured: dict[str, Any]) -> list[Any]:
    idle = measured["idle_pss_bytes"]
    levels = [idle] + [step["pss_bytes"] for step in measured["steps"]]
    per_model = (levels[-1] - idle) / max(1, len(measured["steps"]))
    step_mib = [(b - a) / MIB for a, b in zip(levels[:-1], levels[1:], strict=True)]
    per_gib = 2**30 / per_model if per_model > 0 else float("inf")
    return [
        args.workers,
        len(measured["steps"]),
        artifact_bytes / MIB,
        idle / MIB,
        levels[-1] / MIB,
        per_model / MIB,
        median(step_mib),
        per_model / artifact_bytes,
        per_gib,
    ]


if __name__ == "__main__":
    main()
