"""What the benchmark scripts share: where results go, the machine they ran on, tables."""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCHMARKS = Path(__file__).resolve().parent
RESULTS = BENCHMARKS / "results"
REPO = BENCHMARKS.parent

if str(REPO) not in sys.path:  # run as `python benchmarks/x.py` from a checkout
    sys.path.insert(0, str(REPO))


def add_checkout(parser: argparse.ArgumentParser) -> None:
    """--checkout (a `git archive` of a commit, whose package to run) and --commit."""
    parser.add_argument("--checkout", type=Path, default=None, help="a `git archive` to run")
    parser.add_argument("--commit", default="", help="the commit --checkout holds")


def use_checkout(args: argparse.Namespace) -> Path | None:
    """Import modelhost from --checkout from now on; its folder (None: this checkout's)."""
    if args.checkout is None:
        return None
    folder: Path = args.checkout.resolve()
    sys.path.insert(0, str(folder))
    return folder


def machine() -> dict[str, Any]:
    """Enough about the machine and checkout to compare two result files."""
    return {
        "cpu": _cpu_model(),
        "usable_cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": _git("rev-parse", "--short", "HEAD"),
        "dirty": bool(_git("status", "--porcelain")),
    }


def write_results(name: str, results: dict[str, Any], table: str) -> Path:
    """`benchmarks/results/<name>-<date>.json` (and `.md` beside it); the JSON path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = RESULTS / f"{name}-{stamp}.json"
    path.write_text(json.dumps({"machine": machine(), **results}, indent=2) + "\n")
    path.with_suffix(".md").write_text(table + "\n")
    return path


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            children = (task / "children").read_text().split()
            todo.extend(int(child) for child in children)
    return found


def cores(spec: str) -> set[int]:
    """taskset's list: "1", "0,1", "1-15"."""
    cores: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.partition("-")
        cores.update(range(int(low), int(high or low) + 1))
    return cores


def cpu_seconds(pids: list[int]) -> dict[int, float]:
    """User + system CPU of each process, seconds."""
    ticks = os.sysconf("SC_CLK_TCK")
    seconds = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        seconds[pid] = (int(fields[11]) + int(fields[12])) / ticks
    return seconds


def cpu_spent(before: dict[int, float]) -> dict[int, float]:
    """CPU seconds each process of `before` (a `cpu_seconds` reading) has spent since."""
    return {pid: now - before[pid] for pid, now in cpu_seconds(list(before)).items()}


def add_wrk_run_args(parser: argparse.ArgumentParser, duration_s: int, warmup_s: int) -> None:
    """A wrk run's length and warm-up, the server's and wrk's cores, and `--serve-arg`."""
    parser.add_argument("--duration", type=int, default=duration_s, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=warmup_s, help="seconds of discarded warm-up")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0")
    add_serve_arg(parser)


def add_serve_arg(parser: argparse.ArgumentParser) -> None:
    """`--serve-arg`: an extra argument for `modelhost serve`, repeatable."""
    parser.add_argument(
        "--serve-arg", action="append", default=[], help="extra argument for `modelhost serve`"
    )


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def post_invoke(client: Any, base_url: str, name: str, rows: list[list[float]]) -> dict[str, Any]:
    """POST one invocation; its wall time, cache header and Server-Timing parts (ms)."""
    from modelhost.observe.exchange import parse_server_timing

    started = time.perf_counter()
    response = client.post(f"{base_url}/models/{name}/invoke", json=rows)
    wall_ms = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"POST {name} answered {response.status_code}: {response.text}")
    return {
        "model": name,
        "wall_ms": wall_ms,
        "cache": response.headers.get("x-modelhost-cache"),
        "server_timing_ms": parse_server_timing(response.headers.get("server-timing", "")),
    }


def load_and_predict_ms(path: Path, rows: list[list[float]]) -> float:
    """`joblib.load` plus one predict in this process: the floor for a cold model."""
    import joblib

    started = time.perf_counter()
    joblib.load(path).predict(rows)
    return (time.perf_counter() - started) * 1000


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.2f}"
    return str(value)


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _git(*args: str) -> str:
    try:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    except OSError:  # no git on the machine: the results still get written
        return ""
    return done.stdout.strip()
