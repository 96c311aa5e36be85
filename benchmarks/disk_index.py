"""The disk index at N entries: start-up, a miss's index work, making room for one entry.

A previous run's index of N rows is seeded directly (no entry folders), as a restarted server
finds it; each figure is the median of a few tries, in the process, without a server. With
`--folders`, the entries get real folders too, and the background reconciliation of index and
folders after start-up is timed once.

    python benchmarks/disk_index.py [--entries 100000] [--tries 5] [--folders]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from modelhost.cache.disk import DiskTier, UnpackLimits
from modelhost.cache.disk_budget import Reservation
from modelhost.cache.disk_index import INDEX_FILE, DiskIndex, Row
from modelhost.cache.download import DownloadPolicy
from modelhost.cache.stores import Stores
from modelhost.cache.stores.memory import MemoryStore
from modelhost.records.events import EventLog

ROW_BYTES = 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--folders", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-disk-index-") as scratch:
        cache = Path(scratch)
        seed(cache, args.entries)
        if args.folders:  # a restart's reconciliation, with the previous run's budget full
            print(f"reconciled in the background after start: {reconciled_ms(cache, args.entries)}")
        print(f"entries: {args.entries:,}")
        print(f"start-up (open the index, take the totals): {ms(args.tries, lambda: start(cache))}")
        tier = start(cache)
        print(f"a miss's index work (get, put): {ms(args.tries, lambda: miss(tier))}")
        print(f"room for one entry (evict the oldest): {ms(args.tries, lambda: evict(tier))}")
        tier.close()


def seed(cache: Path, count: int) -> None:
    index = DiskIndex(cache / INDEX_FILE)
    index.put_many(
        Row(
            name=f"m{i:08d}",
            entry=f"m{i:08d}",
            path="model.joblib",
            bytes=ROW_BYTES,
            source="s3://b/m",
            etag=None,
            checked_at=0,
            last_used=i,
        )
        for i in range(count)
    )
    index.set_fact("budget_bytes", count * ROW_BYTES)
    index.close()


def reconciled_ms(cache: Path, count: int) -> str:
    for i in range(count):
        (cache / "models" / f"m{i:08d}").mkdir(parents=True)
        (cache / "models" / f"m{i:08d}" / "model.joblib").write_bytes(bytes(ROW_BYTES))
    tier = start(cache)
    counted, finished = asyncio.run(reconciled(tier))
    assert tier.count() == count, "every folder was known to the index"
    tier.close()
    return f"folders counted (entries may be built) {counted:.0f} ms, done {finished:.0f} ms"


async def reconciled(tier: DiskTier) -> tuple[float, float]:
    started = time.perf_counter()
    await tier.reconciliation.counted()
    counted = (time.perf_counter() - started) * 1000
    await tier.reconcile()
    return counted, (time.perf_counter() - started) * 1000


def start(cache: Path) -> DiskTier:
    stores = Stores(MemoryStore())
    limits, policy = UnpackLimits(2**30, 1000), DownloadPolicy(1, 5)
    tier = DiskTier(cache, 2**40, stores=stores, events=EventLog(), limits=limits, policy=policy)
    tier.rebuild()
    return tier


def miss(tier: DiskTier) -> None:
    name = f"new-{time.perf_counter_ns()}"
    assert tier.get(name) is None
    tier.index.put_many(
        [
            Row(
                name=name,
                entry=name,
                path="model.joblib",
                bytes=ROW_BYTES,
                source="s3://b/n",
                etag=None,
                checked_at=0,
                last_used=time.time(),
            )
        ]
    )


def evict(tier: DiskTier) -> None:
    tier.budget.budget_bytes = tier.used_bytes  # full: the next entry must take the oldest's room
    reservation = Reservation()
    tier.budget.grow(reservation, "new", ROW_BYTES, ROW_BYTES)


def ms(tries: int, run: Callable[[], object]) -> str:
    times = []
    for _ in range(tries):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return f"{statistics.median(times):.3f} ms (median of {tries})"


if __name__ == "__main__":
    main()
