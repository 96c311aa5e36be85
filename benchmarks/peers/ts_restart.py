"""Start-up against TorchServe on the same `.mar`: process start to the first answered request,
for a first start on a fresh folder and for restarts on the folder a previous start left.

    .venv/bin/python benchmarks/peers/ts_restart.py [--server-core 0] [--restarts 3]

The servers alternate, one start each in turn, so a neighbour's load on a shared machine falls
on both. modelhost runs without `--preload-runtimes` (its default list on a fresh folder, the
runtimes its disk index recorded on a restart), unless `--preload-runtimes` names some;
TorchServe as `ts_side_by_side.py` starts it, the model named by `--models`. Results go to
benchmarks/results/ts-restart-<date>.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import RESULTS, machine, markdown_table, write_results  # noqa: E402
from race import _running  # noqa: E402
from ts_side_by_side import MODEL, modelhost_launch, torchserve_launch  # noqa: E402

from modelhost.testing import torchserve  # noqa: E402

Make = Callable[[Path, Path], Any]


def started_s(make: Make, work: Path, store: Path, core: str) -> float:
    """Seconds from the process's start to its first answered request."""
    work.mkdir(exist_ok=True)
    launch, _ = make(work, store)
    started = time.monotonic()
    with _running(launch, core, work / "server.log"):
        return time.monotonic() - started


def measure(makes: dict[str, Make], store: Path, tmp: Path, args: argparse.Namespace) -> dict:
    """Per server: its first start's seconds, then its restarts' on the same folder."""
    seconds = {name: {"first": [], "restart": []} for name in makes}
    for round_ in range(args.rounds):
        for name, make in makes.items():
            work = tmp / f"{name}-{round_}"
            seconds[name]["first"].append(started_s(make, work, store, args.server_core))
        for _ in range(args.restarts):
            for name, make in makes.items():
                work = tmp / f"{name}-{round_}"
                seconds[name]["restart"].append(started_s(make, work, store, args.server_core))
    return seconds


def spread(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f} ({statistics.median(values):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server-core", default="0", help="taskset's cores for each server")
    parser.add_argument("--rounds", type=int, default=2, help="fresh folders, each server")
    parser.add_argument("--restarts", type=int, default=2, help="restarts on each folder")
    parser.add_argument(
        "--preload-runtimes", default="", help="modelhost's (empty: not given, its default)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "store"
        torchserve.custom_handler_mar(store / f"{MODEL}.mar", seed=11)

        def modelhost(work: Path, store: Path) -> Any:
            return modelhost_launch(work, store, args.preload_runtimes)

        makes: dict[str, Make] = {"modelhost": modelhost, "torchserve": torchserve_launch}
        seconds = measure(makes, store, Path(tmp), args)
    rows = [[name, spread(s["first"]), spread(s["restart"])] for name, s in seconds.items()]
    header = ["server", "first start s, range (median)", "restart s, range (median)"]
    document = {"machine": machine(), "settings": vars(args), "seconds": seconds}
    write_results("ts-restart", document, markdown_table(header, rows))
    print(markdown_table(header, rows))
    print(f"results in {RESULTS}")


if __name__ == "__main__":
    main()
