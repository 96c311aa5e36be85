"""A folder store's listing at N models in one flat folder: the first page, a middle page, all.

The store is built in a temporary folder on this disk: model files, and every tenth entry a
folder with its own handler.py. Each page is `list_keys(after, 1000)`, as Triton's repository
index and `GET /v1/models` ask; each figure is the median of a few tries, in the process, without
a server. Results go to benchmarks/results/store-listing-<date>.json.

    python benchmarks/store_listing.py [--entries 10000 100000] [--tries 3] [--folder-every 10]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import write_results

from modelhost.cache.stores.local import LocalStore

PAGE = 1000
SETTLE_S = 1.1  # a folder written this recently is read again each page, as it may still change


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--tries", type=int, default=3)
    parser.add_argument("--folder-every", type=int, default=10)
    parser.add_argument("--scratch", default=None, help="where to build the store (a temp dir)")
    args = parser.parse_args()
    rows = [measure(n, args.tries, args.folder_every, args.scratch) for n in args.entries]
    lines = [
        "| entries | first page, cold ms | first page ms | middle page ms | all pages s "
        "| names MiB |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        print(row, flush=True)
        lines.append(
            f"| {row['entries']:,} | {row['cold_first_page_ms']:.1f} | {row['first_page_ms']:.1f} "
            f"| {row['middle_page_ms']:.1f} | {row['all_pages_s']:.2f} | {row['names_mib']:.1f} |"
        )
    print("\n".join(lines))
    print(f"raw results: {write_results('store-listing', {'rows': rows}, chr(10).join(lines))}")


def measure(entries: int, tries: int, folder_every: int, scratch: str | None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="modelhost-listing-", dir=scratch) as folder:
        root = Path(folder)
        names = build(root, entries, folder_every)
        time.sleep(SETTLE_S)
        store = LocalStore(root)
        middle = names[len(names) // 2]
        cold = median_ms(1, lambda: page(store, ""))  # reads the folder
        first = median_ms(tries, lambda: page(store, ""))
        middle_ms = median_ms(tries, lambda: page(store, middle))
        started = time.perf_counter()
        pages = list_all(store, entries)
        return {
            "entries": entries,
            "names_mib": names_bytes(root) / 2**20,
            "cold_first_page_ms": cold,
            "first_page_ms": first,
            "middle_page_ms": middle_ms,
            "all_pages_s": time.perf_counter() - started,
            "pages": pages,
        }


def build(root: Path, entries: int, folder_every: int) -> list[str]:
    names = []
    for i in range(entries):
        name = f"m{i:08d}"
        if i % folder_every == 0:
            (root / name).mkdir()
            (root / name / "handler.py").write_bytes(b"")
        else:
            name += ".joblib"
            (root / name).write_bytes(b"")
        names.append(name)
    return names


def names_bytes(root: Path) -> int:
    """What a sorted list of the folder's names holds, with a byte per name for its kind."""
    names = os.listdir(root)
    return sys.getsizeof(names) + sum(sys.getsizeof(name) + 1 for name in names)


def page(store: LocalStore, after: str) -> list[str]:
    return asyncio.run(store.list_keys(after, PAGE))


def list_all(store: LocalStore, entries: int) -> int:
    after, pages, listed = "", 0, 0
    while keys := page(store, after):
        after, pages, listed = keys[-1], pages + 1, listed + len(keys)
    assert listed == entries, f"listed {listed} of {entries}"
    return pages


def median_ms(tries: int, call: Callable[[], object]) -> float:
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
