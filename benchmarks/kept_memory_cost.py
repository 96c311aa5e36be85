"""What the growth limit (`--worker-max-growth`) costs a worker's batch: reading its memory
after each one, against a one-row iris prediction for scale. In process; no server.

    python benchmarks/kept_memory_cost.py [--batches 200000] [--tries 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from _common import markdown_table, write_results
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression

from modelhost import testing
from modelhost.workers.kept_memory import KeptMemory


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=200_000)
    parser.add_argument("--tries", type=int, default=5)
    args = parser.parse_args()
    kept = KeptMemory(1 << 30)
    kept.start()
    model = LogisticRegression(max_iter=200).fit(*load_iris(return_X_y=True))
    row = testing.iris_rows(1)
    costs: dict[str, tuple[Callable[[], object], int]] = {
        "reading after a batch": (lambda: kept.after_batch("iris"), args.batches),
        "one-row iris predict": (lambda: model.predict(row), args.batches // 100),
    }
    rows = [
        [name, f"{statistics.median(us_each(call, times) for _ in range(args.tries)):.2f}"]
        for name, (call, times) in costs.items()
    ]
    table = markdown_table(["work", "µs each (median of tries)"], rows)
    print(table)
    write_results("kept_memory_cost", {"args": vars(args), "rows": rows}, table)


def us_each(call: Callable[[], object], times: int) -> float:
    started = time.perf_counter()
    for _ in range(times):
        call()
    return (time.perf_counter() - started) / times * 1e6


if __name__ == "__main__":
    main()
