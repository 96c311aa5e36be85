"""Instructions the frontend runs a request, counted by callgrind: a figure a busy machine does not
move, for changes of a few percent that CPU time cannot tell apart.

modelhost serves iris (`--workers 1`; `--serve-arg` adds to it) under `valgrind --tool=callgrind`,
uncounted until warm; then its frontend is counted idle for `--idle` seconds and under wrk for
`--duration`, and a request's instructions are the loaded count less the idle rate's share.
Workers start from a template by exec, so only the frontend is counted. Under callgrind the
frontend runs about fifty times slower and its batches are smaller than at full speed: compare
variants at the same requests a batch (reported). Each `--variant LABEL=ARGS` (ARGS split as a
shell would) runs in turn, `--rounds` times; `--pythonpath LABEL=DIR` puts DIR first on that
variant's PYTHONPATH, to compare checkouts.

`--bytecodes` counts Python's bytecodes a request instead, by function (count_bytecodes.py), and
lists the functions whose counts differ most between the first two variants.

    python benchmarks/frontend_instructions.py --variant off= --variant "on=--tenant-from header"
    python benchmarks/frontend_instructions.py --variant base= --variant new= \\
        --pythonpath base=/tmp/base --rounds 2 --bytecodes
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import BENCHMARKS, markdown_table, write_results
from hot_path import MODEL, ensure_wrk, wrk
from request_costs import _batched

from modelhost import testing

STARTUP_S = 600.0  # an import under callgrind is slow
SHOWN = 25  # functions listed by --bytecodes


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    variants = [_variant(spec) for spec in args.variant] or [("this", [])]
    paths = dict(entry.split("=", 1) for entry in args.pythonpath)
    runs = []
    with tempfile.TemporaryDirectory(prefix="modelhost-instructions-") as scratch:
        store = Path(scratch) / "store"
        testing.iris_logreg(store / MODEL)
        for round_ in range(1, args.rounds + 1):
            for label, serve_args in variants:
                folder = Path(scratch) / f"{label}-{round_}"
                server = _server(store, folder, serve_args, paths.get(label, ""), args)
                run = _counted(server, folder, args)
                runs.append({"variant": label, "round": round_, "serve_args": serve_args, **run})
                print(json.dumps({k: v for k, v in runs[-1].items() if k != "by_function"}))
    table = _table(runs, "bytecodes" if args.bytecodes else "instructions")
    if args.bytecodes and len(variants) > 1:
        table += "\n\n" + _differences(runs, variants[0][0], variants[1][0])
    print(table)
    write_results("frontend_instructions", {"args": vars(args), "runs": runs}, table)


def _variant(spec: str) -> tuple[str, list[str]]:
    label, _, serve_args = spec.partition("=")
    return label, shlex.split(serve_args)


def _server(
    store: Path, folder: Path, serve_args: list[str], pythonpath: str, args: argparse.Namespace
) -> testing.RunningServer:
    folder.mkdir(parents=True)
    pin = ["taskset", "-c", args.server_core]
    if args.bytecodes:
        counter = [sys.executable, str(BENCHMARKS / "count_bytecodes.py"), str(folder)]
        command, prefix = [*counter, "modelhost", "serve"], pin
    else:
        out = f"--callgrind-out-file={folder / 'callgrind.out'}"
        command = [sys.executable, str(BENCHMARKS / "without_pidfd.py"), "modelhost", "serve"]
        prefix = [*pin, "valgrind", "--tool=callgrind", "--instr-atstart=no", out]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if pythonpath:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [pythonpath, env.get("PYTHONPATH")]))
    server_args = ["--model-store", str(store), "--workers", "1", "--cache-dir", "cache"]
    return testing.RunningServer(
        [*server_args, *serve_args],
        folder,
        env=env,
        prefix=prefix,
        command=command,
        cwd=folder,  # not this checkout: PYTHONPATH's package is the one run
        startup_timeout_s=STARTUP_S,
    )


def _counted(
    server: testing.RunningServer, folder: Path, args: argparse.Namespace
) -> dict[str, Any]:
    """Warm the server, count it idle then loaded; a request's share of what it ran."""
    url = f"{server.url}/models/{MODEL}/invoke"
    counter = Bytecodes(folder) if args.bytecodes else Callgrind(folder)
    with server:
        wrk(url, args.concurrency, args.warmup, args.wrk_core)
        batches_before = _batched(url)
        counter.start(server.pid)
        time.sleep(args.idle)
        counter.mark(server.pid)
        loaded = wrk(url, args.concurrency, args.duration, args.wrk_core)
        counter.mark(server.pid)
        counter.stop(server.pid)
        batches_after = _batched(url)
    requests = loaded["requests"]
    batches = batches_after[0] - batches_before[0]
    idle, total = counter.spans()
    by_function = a_request(idle, total, args.duration / args.idle, requests)
    return {
        "requests": requests,
        "requests_a_batch": (batches_after[1] - batches_before[1]) / batches if batches else 0.0,
        "a_request": sum(by_function.values()),
        "idle_a_second": sum(idle.values()) / args.idle,
        **({"by_function": by_function} if args.bytecodes else {}),
    }


def a_request(
    idle: dict[str, int], loaded: dict[str, int], share: float, requests: int
) -> dict[str, float]:
    """A request's count by function: the loaded span's, less `share` of the idle span's."""
    return {name: (n - idle.get(name, 0) * share) / requests for name, n in loaded.items()}


class Callgrind:
    """The server's count under callgrind: `callgrind_control` turns it on, dumps and stops."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def start(self, pid: int) -> None:
        self._control(pid, "-i", "on")

    def mark(self, pid: int) -> None:
        self._control(pid, "-d")

    def stop(self, pid: int) -> None:
        self._control(pid, "-i", "off")

    def spans(self) -> tuple[dict[str, int], dict[str, int]]:
        """The idle span's and the loaded span's instructions (one entry: the whole program)."""
        idle, loaded = (_total(self.folder / f"callgrind.out.{part}") for part in (1, 2))
        return {"program": idle}, {"program": loaded}

    @staticmethod
    def _control(pid: int, *option: str) -> None:
        subprocess.run(["callgrind_control", *option, str(pid)], check=True, capture_output=True)


class Bytecodes:
    """The server's count under count_bytecodes.py, steered by files in its control folder."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def start(self, pid: int) -> None:
        (self.folder / "on").touch()

    def mark(self, pid: int) -> None:
        mark = self.folder / "mark"
        mark.touch()
        while mark.exists():
            time.sleep(0.05)

    def stop(self, pid: int) -> None:
        (self.folder / "on").unlink()

    def spans(self) -> tuple[dict[str, int], dict[str, int]]:
        """The counts of the last two spans marked: idle, then loaded."""
        marked = sorted(self.folder.glob("counts-*.json"), key=lambda path: int(path.stem[7:]))
        idle, loaded = (json.loads(path.read_text())["bytecodes"] for path in marked[-2:])
        return idle, loaded


def _total(dump: Path) -> int:
    """The instructions a callgrind dump counted."""
    for line in dump.read_text().splitlines():
        if line.startswith(("totals:", "summary:")):
            return int(line.split()[1])
    raise ValueError(f"{dump} holds no totals")


def _table(runs: list[dict[str, Any]], unit: str) -> str:
    rows = [
        [run["variant"], run["round"], run["requests"], run["requests_a_batch"], run["a_request"]]
        for run in runs
    ]
    header = ["variant", "round", "requests", "requests a batch", f"{unit} a request"]
    return markdown_table(header, rows)


def _differences(runs: list[dict[str, Any]], first: str, second: str) -> str:
    """Bytecodes a request by function, averaged over rounds: the largest differences."""
    means = {
        label: _mean_by_function([r for r in runs if r["variant"] == label])
        for label in (first, second)
    }
    names = means[first].keys() | means[second].keys()
    gap = {name: means[second].get(name, 0.0) - means[first].get(name, 0.0) for name in names}
    shown = sorted(names, key=lambda name: -abs(gap[name]))[:SHOWN]
    rows = [
        [name, means[first].get(name, 0.0), means[second].get(name, 0.0), gap[name]]
        for name in shown
    ]
    return markdown_table(["function", first, second, f"{second} - {first}"], rows)


def _mean_by_function(runs: list[dict[str, Any]]) -> dict[str, float]:
    summed: collections.Counter[str] = collections.Counter()
    for run in runs:
        summed.update(run["by_function"])
    return {name: total / len(runs) for name, total in summed.items()}


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", default=[], metavar="LABEL=ARGS")
    parser.add_argument("--pythonpath", action="append", default=[], metavar="LABEL=DIR")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--duration", type=int, default=20, help="seconds counted under load")
    parser.add_argument("--idle", type=int, default=10, help="seconds counted idle")
    parser.add_argument("--warmup", type=int, default=5, help="seconds of load uncounted")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0")
    parser.add_argument("--bytecodes", action="store_true", help="count bytecodes by function")
    return parser.parse_args()


if __name__ == "__main__":
    main()
