"""The live miss-ratio curve: how close it is, what it costs, and whether it predicts a rerun.

    python benchmarks/sizing.py sample     # a sample of a million Zipf names against the exact
                                           # curve (--max-names 4400 samples 1% of those seen)
    python benchmarks/sizing.py memory     # the curve's memory after 10,000 and 1,000,000 names
    python benchmarks/sizing.py record     # microseconds a request pays, by names in play
    python benchmarks/sizing.py churn      # the churn workload at 1x room: its curve read after
                                           # the run predicts reruns at 1/2x, 2x and 4x the room

`churn` runs benchmarks/churn.py (modelhost alone, LRU) once per room. The server calls a request
that joined a load under way a miss; LRU's curve, like `simulate`'s replay, counts only the load's
first request, so the rerun's figure it predicts is the share of requests that started no load
(`no_load_ratio`); both are reported. The hot path's cost with the curve on and off is measured by
benchmarks/hot_path.py (`--serve-arg=--sizing-names=0`).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
import tracemalloc
from typing import Any

import numpy as np
from _common import BENCHMARKS, RESULTS, markdown_table, write_results

from modelhost.cache.curve import BINS, COLD, Curve, MissRatioCurve, bin_of
from modelhost.toolkit.simulate import lru
from modelhost.toolkit.simulate.trace import make_trace

KiB = 2**10


def zipf_names(names: int, requests: int, exponent: float = 1.0, seed: int = 0) -> list[str]:
    weights = 1 / np.arange(1, names + 1) ** exponent
    picks = np.random.default_rng(seed).choice(names, size=requests, p=weights / weights.sum())
    return [f"tenant-{i}" for i in picks]


def size_of(name: str) -> int:
    """Model sizes of 100 to 400 KiB, fixed per name."""
    return (100 + int(name.rsplit("-", 1)[1]) % 7 * 50) * KiB


def replayed(requests: list[str], max_names: int) -> MissRatioCurve:
    curve = MissRatioCurve(now=0.0, max_names=max_names)
    for i, name in enumerate(requests):
        curve.record(name, size_of(name), now=i * 1e-4)
    return curve


def sample(args: argparse.Namespace) -> dict[str, Any]:
    """The sampled curve against the exact one, at budgets from 1% to 99% of the exact hits.

    `bins_error_points` reads the exact distances through the curve's bins at the worst budget:
    the error no sample can go below, since the curve interpolates inside a bin. The sample's
    own error is `max_error_points_against_bins`, against that binned exact curve.
    """
    requests = zipf_names(args.names, args.requests, args.zipf, args.seed)
    started = time.perf_counter()
    exact = lru.stack_distances(make_trace(requests, {n: size_of(n) for n in set(requests)}))
    exact_s = time.perf_counter() - started
    finite = np.sort([d for d in exact if d != math.inf])
    budgets = [float(finite[int(q * (len(finite) - 1))]) for q in np.linspace(0.01, 0.99, 25)]
    truth = lru.hit_ratios(exact, [int(b) for b in budgets])
    binned = binned_curve(exact)
    bins_errors = [abs(binned.hit_ratio_at(b) - t) for b, t in zip(budgets, truth, strict=True)]
    rows = []
    for max_names in args.max_names:
        started = time.perf_counter()
        live = replayed(requests, max_names)
        replay_s = time.perf_counter() - started
        curve = live.windows.curve("day")
        errors = [abs(curve.hit_ratio_at(b) - t) for b, t in zip(budgets, truth, strict=True)]
        past_bins = [abs(curve.hit_ratio_at(b) - binned.hit_ratio_at(b)) for b in budgets]
        upper = [e for e, t in zip(errors, truth, strict=True) if t >= 0.5]
        rows.append(
            {
                "max_names": max_names,
                "rate": round(live.rate, 4),
                "max_error_points": round(100 * max(errors), 2),
                "mean_error_points": round(100 * float(np.mean(errors)), 2),
                "max_error_points_over_half": round(100 * max(upper), 2) if upper else None,
                "worst_budget_mib": round(budgets[int(np.argmax(errors))] / 2**20, 2),
                "bins_error_points": round(100 * bins_errors[int(np.argmax(errors))], 2),
                "max_error_points_against_bins": round(100 * max(past_bins), 2),
                "replay_s": round(replay_s, 1),
                "exact_s": round(exact_s, 1),
            }
        )
        print(rows[-1], flush=True)
    return {
        "names": args.names,
        "requests": args.requests,
        "zipf": args.zipf,
        "seed": args.seed,
        "bins_max_error_points": round(100 * max(bins_errors), 2),
        "rows": rows,
    }


def binned_curve(distances: list[float]) -> Curve:
    """The exact distances in the live curve's bins."""
    histogram = [0.0] * (BINS + 1)
    for distance in distances:
        histogram[COLD if distance == math.inf else bin_of(distance)] += 1
    return Curve(histogram[:COLD], histogram[COLD])


def memory(args: argparse.Namespace) -> dict[str, Any]:
    """Python heap the curve holds after every name was seen `per_name` times (Zipf order)."""
    rows = []
    for names in (10_000, 1_000_000):
        requests = zipf_names(names, names * args.per_name, args.zipf, seed=1)
        tracemalloc.start()
        curve = replayed(requests, args.max_names[0])
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rows.append(
            {
                "distinct_names": names,
                "requests": len(requests),
                "tracked_names": len(curve.distances),
                "frequent_names": len(curve.frequent.names),
                "held_mib": round(held / 2**20, 2),
                "peak_mib": round(peak / 2**20, 2),
            }
        )
        print(rows[-1], flush=True)
    return {"max_names": args.max_names[0], "rows": rows}


def record(args: argparse.Namespace) -> dict[str, Any]:
    """Microseconds per `MissRatioCurve.record`, uniform over a few to many names."""
    rows = []
    for names in (1, 4, 100, 10_000, 1_000_000):
        rng = np.random.default_rng(2)
        requests = [f"tenant-{i}" for i in rng.integers(0, names, 300_000)]
        curve = MissRatioCurve(now=0.0, max_names=args.max_names[0])
        started = time.perf_counter()
        for i, name in enumerate(requests):
            curve.record(name, 300 * KiB, now=i * 1e-4)
        elapsed = time.perf_counter() - started
        rows.append({"names": names, "us_per_request": round(1e6 * elapsed / len(requests), 2)})
        print(rows[-1], flush=True)
    return {"rows": rows}


def churn(args: argparse.Namespace) -> dict[str, Any]:
    """One churn run per room; the 1x run's curve predicts the others."""
    runs = {room: churn_run(room, args) for room in args.rooms}
    base = runs[args.rooms[0]]
    points = [(p["roomBytes"], p["hitRatio"]) for p in base["sizing"]["curve"]]
    rows = []
    for room, run in runs.items():
        actual_room = run["sizing"]["roomBytes"]
        rows.append(
            {
                "room_models": room,
                "room_bytes": actual_room,
                "predicted": round(interpolated(points, actual_room), 3),
                "no_load_ratio": run["no_load_ratio"],
                "hit_ratio": run["hit_ratio"],
                "throughput_rps": run["throughput_rps"],
            }
        )
        print(rows[-1], flush=True)
    return {"rows": rows, "curve": points, "base_room_models": args.rooms[0]}


def churn_run(room: int, args: argparse.Namespace) -> dict[str, Any]:
    before = set(RESULTS.glob("churn-*.json"))
    command = [
        sys.executable,
        str(BENCHMARKS / "churn.py"),
        "--skip-floor",
        "--room",
        str(room),
        "--duration",
        str(args.duration),
        "--serve-arg=--eviction-policy=lru",
        "--serve-arg=--admission=none",  # the curve is LRU's
        "--rate",  # open loop: the same stream of requests whatever the room
        str(args.rate),
    ]
    subprocess.run(command, check=True)
    (written,) = set(RESULTS.glob("churn-*.json")) - before
    return dict(json.loads(written.read_text())["modelhost"])


def interpolated(points: list[tuple[int, float]], room: float) -> float:
    """The curve at `room`: linear in log(room) between its points, flat past its ends."""
    if room <= points[0][0]:
        return points[0][1] if room == points[0][0] else 0.0
    for (low, low_ratio), (high, high_ratio) in zip(points, points[1:], strict=False):
        if room <= high:
            share = (math.log(room) - math.log(low)) / (math.log(high) - math.log(low))
            return low_ratio + share * (high_ratio - low_ratio)
    return points[-1][1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=["sample", "memory", "record", "churn"])
    parser.add_argument("--names", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=3_000_000)
    parser.add_argument("--zipf", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0, help="sample: of the Zipf draws")
    parser.add_argument("--max-names", type=int, nargs="+", default=[10_000])
    parser.add_argument("--per-name", type=int, default=3, help="memory: requests per name")
    parser.add_argument("--rooms", type=int, nargs="+", default=[10, 5, 20, 40])
    parser.add_argument("--duration", type=float, default=300.0, help="churn: seconds a run")
    parser.add_argument(
        "--rate",
        type=float,
        default=20.0,
        help="churn: requests a second (0: 16 clients in a loop)",
    )
    args = parser.parse_args()
    results = {"sample": sample, "memory": memory, "record": record, "churn": churn}[args.what](
        args
    )
    table = markdown_table(list(results["rows"][0]), [list(r.values()) for r in results["rows"]])
    path = write_results(f"sizing-{args.what}", {"args": vars(args), **results}, table)
    print(table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
