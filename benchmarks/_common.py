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


def parse_server_timing(header: str | None) -> dict[str, float]:
    """`queue;dur=0.1, load;dur=12.5` → {"queue": 0.1, "load": 12.5} (milliseconds)."""
    parts: dict[str, float] = {}
    for metric in (header or "").split(","):
        name, _, params = metric.strip().partition(";")
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key == "dur" and name:
                parts[name] = float(value.strip('"'))
    return parts


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
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
    return done.stdout.strip()
