"""A poisoned model beside others: what its requests cost the models sharing its workers.

One server (`--workers 1` by default) holds `--models` loaded forests of a quiet tenant
(`tenants/quiet/`) and `--poisoned` models of a noisy one (`tenants/noisy/`), whose handler exits
its process on a body saying boom. `--clients` closed-loop clients invoke the forests in turn
for `--seconds`, once alone and once while one client sends the poisoned models in turn a boom
request `--poison-rate` times a second. Each pass reports the forests' requests, failures and
latency, the poisoned models' answers by status, and the workers that died. Tenants are off
unless `--serve-arg=--tenant-from=name:2`. `--sigkill`: the handler kills its process with
SIGKILL instead, as the kernel's OOM killer would, a death that names no thread. `--keep-mib N`:
it keeps N MiB of each boom request instead, as a leak would; with a tight
`--serve-arg=--memory-budget=...` the forests then lose their room, unless the worker is
replaced (`--worker-max-growth`, `0` for no limit).

    python benchmarks/poison.py [--seconds 10] [--poison-rate 5] [--clients 2] [--models 20]
                                [--poisoned 1] [--workers 1] [--sigkill | --keep-mib N]
                                [--serve-arg=...]
"""

from __future__ import annotations

import argparse
import collections
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from _common import add_serve_arg, markdown_table, write_results

from modelhost import testing

QUIET, NOISY = "tenants/quiet", "tenants/noisy"
HANDLER = '''"""Answers, unless the body says boom: then it ends its process."""

import os


def handle(data, context):
    if data is None:
        return None
    if any(b"boom" in bytes(request.get("body") or b"") for request in data):
        os._exit(1)
    return [{"answered": True} for _ in data]
'''
KEEPING_HANDLER = '''"""Answers, keeping MIB MiB of each boom request."""

KEPT = []


def handle(data, context):
    if data is None:
        return None
    for request in data:
        if b"boom" in bytes(request.get("body") or b""):
            kept = bytearray(MIB << 20)
            kept[::4096] = b"x" * len(kept[::4096])
            KEPT.append(kept)
    return [{"answered": True} for _ in data]
'''
HEADER = [
    "poison / s",
    "forest requests",
    "failed",
    "p50 ms",
    "p99 ms",
    "poisoned answers",
    "workers died",
    "workers grown",
]


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-poison-") as scratch:
        store = _store(Path(scratch) / "store", args)
        rows = [
            _pass(store, Path(scratch) / f"pass-{rate}", rate, args)
            for rate in (0, args.poison_rate)
        ]
    table = markdown_table(HEADER, [[row[key] for key in HEADER] for row in rows])
    print(table)
    write_results("poison", {"args": vars(args), "passes": rows}, table)


def _store(root: Path, args: argparse.Namespace) -> Path:
    handler = HANDLER.replace("os._exit(1)", "os.kill(os.getpid(), 9)") if args.sigkill else HANDLER
    if args.keep_mib:
        handler = KEEPING_HANDLER.replace("MIB", str(args.keep_mib))
    for number in range(args.models):
        testing.random_forest(root / QUIET / f"forest-{number}.joblib", 2 * 2**20, seed=number)
    for number in range(args.poisoned):
        (root / NOISY / f"poisoned-{number}").mkdir(parents=True)
        (root / NOISY / f"poisoned-{number}" / "handler.py").write_text(handler)
    return root


def _pass(store: Path, folder: Path, rate: float, args: argparse.Namespace) -> dict[str, Any]:
    serve = [*testing.serve_args(store, folder / "cache", workers=args.workers), *args.serve_arg]
    with testing.RunningServer(serve, folder) as server:
        names = [f"{QUIET}/forest-{number}.joblib" for number in range(args.models)]
        poisoned = [f"{NOISY}/poisoned-{number}" for number in range(args.poisoned)]
        with httpx.Client(base_url=server.url, timeout=60) as client:
            for name in names:
                client.post(f"/models/{name}/invoke", json=[[0.0] * 64]).raise_for_status()
        latencies: list[float] = []
        failed: collections.Counter[int] = collections.Counter()
        answers: collections.Counter[int] = collections.Counter()
        until = time.monotonic() + args.seconds
        threads = [
            threading.Thread(target=_invoke, args=(server.url, names, until, latencies, failed))
            for _ in range(args.clients)
        ]
        if rate:
            threads.append(
                threading.Thread(target=_poison, args=(server.url, poisoned, rate, until, answers))
            )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        exits = collections.Counter(event["reason"] for event in server.events("worker_exit"))
    latencies.sort()
    return {
        "poison / s": rate,
        "forest requests": len(latencies),
        "failed": dict(failed),
        "p50 ms": round(_at(latencies, 0.5) * 1000, 1),
        "p99 ms": round(_at(latencies, 0.99) * 1000, 1),
        "poisoned answers": dict(answers),
        "workers died": exits["died"],
        "workers grown": exits["grown"],
    }


def _invoke(
    url: str,
    names: list[str],
    until: float,
    latencies: list[float],
    failed: collections.Counter[int],
) -> None:
    with httpx.Client(base_url=url, timeout=60) as client:
        number = 0
        while time.monotonic() < until:
            started = time.monotonic()
            answer = client.post(f"/models/{names[number % len(names)]}/invoke", json=[[0.0] * 64])
            latencies.append(time.monotonic() - started)
            if answer.status_code != 200:
                failed[answer.status_code] += 1
            number += 1


def _poison(
    url: str, names: list[str], rate: float, until: float, answers: collections.Counter[int]
) -> None:
    headers = {"content-type": "application/octet-stream"}
    with httpx.Client(base_url=url, timeout=60) as client:
        number = 0
        while time.monotonic() < until:
            name = names[number % len(names)]
            answer = client.post(f"/models/{name}/invoke", content=b"boom", headers=headers)
            answers[answer.status_code] += 1
            number += 1
            time.sleep(1 / rate)


def _at(values: list[float], quantile: float) -> float:
    return values[min(len(values) - 1, int(len(values) * quantile))] if values else float("nan")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--poison-rate", type=float, default=5.0, help="boom requests a second")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--models", type=int, default=20)
    parser.add_argument("--poisoned", type=int, default=1, help="the noisy tenant's models")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--sigkill", action="store_true", help="the handler SIGKILLs itself")
    parser.add_argument("--keep-mib", type=int, default=0, help="the handler keeps this much")
    add_serve_arg(parser)
    return parser.parse_args()


if __name__ == "__main__":
    main()
