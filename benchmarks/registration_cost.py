"""The frontend's CPU a registration, beside how many models are loaded.

A store of padded iris archives (`.tar.gz`, hard links to 4 sources); one server (`--workers 1`,
a budget with room for every model); for each count in `--loaded`, that many models are
registered first (`POST /models`), then one client registers new names back to back for
`--seconds`. Reported: the frontend's CPU a registration (from /proc) and the registrations' p50
at the client. Each count runs on a fresh server.

    python benchmarks/registration_cost.py                       # 100, 1,000 and 4,000 loaded
    python benchmarks/registration_cost.py --loaded 100 4000 --seconds 20
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    add_serve_arg,
    cpu_seconds,
    cpu_spent,
    markdown_table,
    process_tree,
    write_results,
)
from scale import build_sources

KiB = 2**10
SOURCES = 4


def build_store(root: Path, names: int, pad_kib: int) -> Path:
    """`names` hard links to scale.py's padded iris archives."""
    archives = [f"{folder}.tar.gz" for folder in build_sources(root, SOURCES, pad_kib * KiB)]
    store = root / "store"
    store.mkdir(parents=True)
    for i in range(names):
        os.link(archives[i % SOURCES], store / f"a{i:05d}.tar.gz")
    return store


def run(loaded: int, args: argparse.Namespace) -> dict[str, Any]:
    import httpx

    from modelhost import testing
    from modelhost.resources import disk_size_bytes

    with tempfile.TemporaryDirectory(prefix="registration-cost-") as scratch:
        work = Path(scratch)
        archives = loaded + 4000
        store = build_store(work, archives, args.pad_kib)
        serve = testing.serve_args(
            store,
            work / "cache",
            workers=1,
            memory_budget=args.memory_budget,
            disk_budget=disk_size_bytes(work),  # the most the server takes: never evicts here
        )
        with (
            testing.RunningServer([*serve, *args.serve_arg], work) as server,
            httpx.Client(base_url=server.url, timeout=120) as client,
        ):
            for k in range(loaded):
                register(client, k, archives)
            before = cpu_seconds(process_tree(server.pid))
            walls: list[float] = []
            deadline = time.monotonic() + args.seconds
            while time.monotonic() < deadline:
                walls.append(register(client, loaded + len(walls), archives))
            spent = cpu_spent(before)
            memory = client.get("/stats").json()["memory"]
    return {
        "loaded_before": loaded,
        "loaded_after": memory["loadedModels"],
        "registrations": len(walls),
        "frontend_cpu_ms": round(spent[server.pid] / len(walls) * 1000, 2),
        "server_cpu_ms": round(sum(spent.values()) / len(walls) * 1000, 2),
        "p50_ms": round(statistics.median(walls), 2),
    }


def register(client: Any, k: int, archives: int) -> float:
    """`POST /models` of archive k under a new name; its milliseconds at the client."""
    started = time.perf_counter()
    body = {"model_name": f"r{k:06d}", "url": f"a{k % archives:05d}.tar.gz"}
    answer = client.post("/models", json=body)
    if answer.status_code != 200:
        raise RuntimeError(f"registration {k}: {answer.status_code} {answer.text}")
    return (time.perf_counter() - started) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loaded", type=int, nargs="+", default=[100, 1000, 4000])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--pad-kib", type=int, default=64, help="each model's padding")
    parser.add_argument("--memory-budget", default="8GiB")
    add_serve_arg(parser)
    args = parser.parse_args()
    rows = []
    for loaded in args.loaded:
        rows.append(run(loaded, args))
        print(rows[-1], flush=True)
    header = ["loaded before", "loaded after", "registrations", "frontend CPU ms"]
    header += ["server CPU ms", "p50 ms"]
    table = markdown_table(header, [list(row.values()) for row in rows])
    path = write_results("registration_cost", {"settings": vars(args), "runs": rows}, table)
    print(table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
