"""The main process's cost of one routing table for its fronts, with N models loaded.

`Routing.table()` walks every loaded model at its first build, on a worker's change and each
second; this times that, and the table's packing, over a host of N loaded models held by two
workers (a stand-in for the host: only what the table reads). Then an event that moves no
route: the table and its compare with the last. Then one more model loads: the table's time,
what each front is sent for it, and the time its loop stops to read that.
`--checkout` times another commit's (a `git archive`).

    python benchmarks/front_table.py [--models 1000 10000 40000] [--checkout /tmp/base]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _common import add_checkout, markdown_table, use_checkout, write_results

ROUNDS = 5


def fake_host(models: int) -> Any:
    """The parts of a ModelHost a table reads, with `models` loaded on two workers."""
    from modelhost.cache.memory import State
    from modelhost.manifest import NO_MANIFEST

    workers = [SimpleNamespace(pid=4101 + n, alive=True, untrusted=False) for n in range(2)]
    dispatchers = {
        f"tenants/t{n:05d}/model.joblib": SimpleNamespace(
            replicas={1: SimpleNamespace(worker=workers[n % 2], draining=False)},
            queue=SimpleNamespace(max_batch_size=1),
        )
        for n in range(models)
    }
    residents = {name: SimpleNamespace(state=State.LOADED) for name in dispatchers}
    return SimpleNamespace(
        copies=SimpleNamespace(dispatchers=dispatchers),
        memory=SimpleNamespace(get=residents.get, residents=residents),
        resolve=lambda name: name,
        versioned=set(),
        manifests=SimpleNamespace(of=lambda name: NO_MANIFEST),
        devices=SimpleNamespace(capable=set()),
        events=SimpleNamespace(subscribe=lambda listener: None),
        scheduling=SimpleNamespace(tenant_policies=None),
        pool=SimpleNamespace(threads=1),
    )


def measure(models: int, folder: Path) -> dict[str, Any]:
    from modelhost.config import load_config
    from modelhost.errors import HeaderTooLarge
    from modelhost.fronts.messages import pack
    from modelhost.http.front_routes import Routing

    routing = Routing(fake_host(models), None, load_config({}, {}, folder), folder / "run")
    times_ms = []
    for _ in range(ROUNDS):
        getattr(routing, "recheck", lambda: None)()  # every model walked
        started = time.perf_counter()
        table = routing.table()
        times_ms.append((time.perf_counter() - started) * 1000)
    started = time.perf_counter()
    try:
        packed: int | str = len(pack(table))
    except HeaderTooLarge:
        packed = "refused"
    pack_ms = (time.perf_counter() - started) * 1000
    return {
        "models": models,
        "walk_ms": statistics.median(times_ms),
        "pack_ms": pack_ms,
        "bytes": packed,
        "unmoved_ms": nothing_moved(routing, table),
        **one_more_loaded(routing, table),
    }


def nothing_moved(routing: Any, table: Any) -> float:
    """Ms to build the table after an event that moves no route, and to compare it with the
    last, as the fronts' publisher does."""
    from modelhost.records.events import Event

    getattr(routing, "changed", lambda event: None)(Event("download", "not/loaded.joblib"))
    started = time.perf_counter()
    if routing.table() == table:
        return (time.perf_counter() - started) * 1000
    raise AssertionError("the table changed with no route moved")


def one_more_loaded(routing: Any, table: Any) -> dict[str, Any]:
    """What a front is sent after one more model loads, and its loop's time to take it in."""
    from modelhost.fronts import messages
    from modelhost.records.events import Event

    dispatchers, memory = routing.host.copies.dispatchers, routing.host.memory
    dispatchers["one/more.joblib"] = next(iter(dispatchers.values()))
    memory.residents["one/more.joblib"] = next(iter(memory.residents.values()))
    getattr(routing, "changed", lambda event: None)(Event("load", "one/more.joblib"))
    started = time.perf_counter()
    newest = routing.table()
    rebuild_ms = (time.perf_counter() - started) * 1000
    changes = getattr(messages, "changes", lambda old, new: new)  # an older checkout: whole
    started = time.perf_counter()
    looked_at = getattr(routing, "looked_at", None)  # an older checkout compares every route
    change = changes(table, newest) if looked_at is None else changes(table, newest, looked_at)
    sent = messages.pack(change)
    changes_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    messages.Unpacker().feed(sent)
    front_ms = (time.perf_counter() - started) * 1000
    return {
        "rebuild_ms": rebuild_ms,
        "changes_ms": changes_ms,
        "change_bytes": len(sent),
        "front_ms": front_ms,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", type=int, default=[1000, 10_000, 40_000])
    add_checkout(parser)
    args = parser.parse_args()
    use_checkout(args)
    with tempfile.TemporaryDirectory(prefix="modelhost-front-table-") as folder:
        rows = [measure(models, Path(folder)) for models in args.models]
    table = markdown_table(
        [
            "models loaded",
            "table ms, every model walked (median of 5)",
            "pack ms",
            "bytes packed",
            "an event moving no route: table and compare ms",
            "one load: table ms",
            "one load: ms to pack what changed",
            "bytes to a front",
            "a front's ms to read them",
        ],
        [
            [
                f"{r['models']:,}",
                f"{r['walk_ms']:.1f}",
                f"{r['pack_ms']:.1f}",
                r["bytes"],
                f"{r['unmoved_ms']:.1f}",
                f"{r['rebuild_ms']:.1f}",
                f"{r['changes_ms']:.1f}",
                r["change_bytes"],
                f"{r['front_ms']:.2f}",
            ]
            for r in rows
        ],
    )
    print(table)
    print(f"\nraw results: {write_results('front_table', {'rows': rows}, table)}")


if __name__ == "__main__":
    main()
