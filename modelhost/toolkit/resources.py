"""The server's own CPU seconds and peak memory (PSS) over a step, sampled while it runs.

`/proc` reads a server on this machine and its descendants; `/metrics` reads one elsewhere.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

Reading = tuple[float, float]  # (cpu seconds so far, PSS bytes now)
SAMPLE_EVERY_S = 0.25
_METRIC = re.compile(r"^(modelhost_\w+)(\{[^}]*\})? (\S+)$", re.MULTILINE)


class ServerUsage(NamedTuple):
    """What the server used over one step; NaN without a reading."""

    cpu_s: float
    peak_pss_bytes: float
    source: str


def _tree(root: int) -> list[int]:
    """`root` and every process below it."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # it exited while we looked
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def _cpu_and_pss(pid: int) -> Reading:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0.0, 0.0
    cpu_s = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    found = re.search(r"^Pss:\s+(\d+) kB", rollup, re.MULTILINE)
    return cpu_s, float(found[1]) * 1024 if found else 0.0


def proc_reader(pid: int) -> Callable[[], Reading]:
    def read() -> Reading:
        readings = [_cpu_and_pss(member) for member in _tree(pid)]
        return sum(r[0] for r in readings), sum(r[1] for r in readings)

    return read


def parse_usage(metrics_text: str) -> Reading:
    cpu_s = pss = 0.0
    for name, _labels, value in _METRIC.findall(metrics_text):
        if name in ("modelhost_process_cpu_seconds_total", "modelhost_worker_cpu_seconds_total"):
            cpu_s += float(value)
        elif name == "modelhost_memory_used_bytes":
            pss = float(value)
    return cpu_s, pss


def metrics_reader(url: str, timeout_s: float = 5.0) -> Callable[[], Reading]:
    import httpx

    def read() -> Reading:
        return parse_usage(httpx.get(f"{url.rstrip('/')}/metrics", timeout=timeout_s).text)

    return read


class UsageProbe:
    """Samples `read` in a thread while in a `with` block; `usage` then holds the result."""

    def __init__(self, read: Callable[[], Reading], source: str) -> None:
        self._read, self.source = read, source
        self._readings: list[Reading] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _take(self) -> None:
        with contextlib.suppress(Exception):  # a gap, not a failed step
            self._readings.append(self._read())

    def _sample(self) -> None:
        self._take()
        while not self._stop.wait(SAMPLE_EVERY_S):
            self._take()

    def __enter__(self) -> UsageProbe:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self._take()

    @property
    def usage(self) -> ServerUsage:
        if not self._readings:
            return ServerUsage(float("nan"), float("nan"), self.source)
        cpu = self._readings[-1][0] - self._readings[0][0]
        return ServerUsage(cpu, max(r[1] for r in self._readings), self.source)


def probe_for(url: str, pid: int | None) -> UsageProbe:
    """/proc when the server runs here, else its /metrics."""
    if pid is not None and Path(f"/proc/{pid}/stat").exists():
        return UsageProbe(proc_reader(pid), "proc")
    return UsageProbe(metrics_reader(url), "metrics")
