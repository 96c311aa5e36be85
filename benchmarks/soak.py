"""Soak: does the frontend's memory stay flat over a long run?

C clients invoke M iris models for the given minutes, mixing in the traffic that used to leave
state behind: names that do not exist (each distinct) and bodies the model cannot take. The
frontend's RSS is sampled every 10 s; after a warm-up (the first fifth of the run, at most 5
minutes) it must stay within 5% of its value at the end of the warm-up.

    python benchmarks/soak.py --minutes 30 [--clients 4] [--models 40] [--pause-ms 5]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import psutil
from _common import add_serve_arg, markdown_table, write_results

from modelhost import testing

SAMPLE_EVERY_S = 10.0
FLAT_WITHIN = 0.05


def client(
    url: str, models: list[str], deadline: float, seed: int, counts: Counter[str], pause_s: float
) -> None:
    """Round-robin over the models; every 10th request a made-up name, every 15th a bad body."""
    row = testing.iris_rows(1)[0]
    with httpx.Client(base_url=url, timeout=60) as http:
        for n in itertools.count(seed):
            if time.monotonic() >= deadline:
                return
            if n % 10 == 0:
                name, body = f"missing/{seed}-{n}.joblib", [row]
            elif n % 15 == 0:
                name, body = models[n % len(models)], [["not", "numbers"]]
            else:
                name, body = models[n % len(models)], [row]
            counts[str(http.post(f"/models/{name}/invoke", json=body).status_code)] += 1
            time.sleep(pause_s)


def sample_rss(pid: int, deadline: float, samples: list[tuple[float, int, int]]) -> None:
    """(seconds, RSS, threads): a thread the loop starts late brings a malloc arena with it."""
    started = time.monotonic()
    process = psutil.Process(pid)
    while time.monotonic() < deadline:
        with process.oneshot():
            samples.append(
                (time.monotonic() - started, process.memory_info().rss, process.num_threads())
            )
        time.sleep(SAMPLE_EVERY_S)


def soak(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="modelhost-soak-"))
    trained = testing.iris_logreg(work / "store/.src/iris.joblib")
    models = [f"tenant-{i:03d}/m.joblib" for i in range(args.models)]
    for name in models:
        testing.copy_artifact(trained, work / "store" / name)
    serve = testing.serve_args(work / "store", work / "cache", workers=args.workers)
    counts: Counter[str] = Counter()
    samples: list[tuple[float, int, int]] = []
    with testing.RunningServer([*serve, *args.serve_arg], work) as server:
        deadline = time.monotonic() + args.minutes * 60
        threads = [
            threading.Thread(
                target=client,
                args=(server.url, models, deadline, seed, counts, args.pause_ms / 1000),
            )
            for seed in range(args.clients)
        ]
        threads.append(threading.Thread(target=sample_rss, args=(server.pid, deadline, samples)))
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    return verdict(samples, counts, args.minutes)


def verdict(samples: list[tuple[float, int, int]], counts: Counter[str], minutes: float) -> dict:
    warm_up_s = min(300.0, minutes * 60 / 5)
    after = [rss for at, rss, _ in samples if at >= warm_up_s]
    threads = [count for at, _, count in samples if at >= warm_up_s]
    base = after[0] if after else 0
    worst = max(after, default=0)
    return {
        "minutes": minutes,
        "statuses": dict(counts),
        "rss_at_warm_up_mib": round(base / 2**20, 1),
        "rss_max_after_mib": round(worst / 2**20, 1),
        "rss_last_mib": round(after[-1] / 2**20, 1) if after else None,
        "growth": round(worst / base - 1, 4) if base else None,
        "flat": bool(base) and worst <= base * (1 + FLAT_WITHIN),
        "threads_at_warm_up": threads[0] if threads else None,
        "threads_max_after": max(threads, default=None),
        "samples": [(round(at), rss, count) for at, rss, count in samples],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--models", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--pause-ms", type=float, default=5.0, help="each client, between calls")
    add_serve_arg(parser)
    result = soak(parser.parse_args())
    columns = [
        "minutes",
        "rss_at_warm_up_mib",
        "rss_max_after_mib",
        "rss_last_mib",
        "growth",
        "threads_at_warm_up",
        "threads_max_after",
    ]
    table = markdown_table(
        [*columns, "flat", "statuses"],
        [[*(result[c] for c in columns), result["flat"], result["statuses"]]],
    )
    path = write_results("soak", result, table)
    print(table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
