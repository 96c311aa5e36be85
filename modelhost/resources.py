"""What this machine gives the process: cores, memory and disk, within its cgroup limits.

Nothing here reads configuration. The cgroup root and the process's own cgroup file are
parameters so tests can fake them with plain files.
"""

from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """Cores this process may use: its CPU affinity, capped by a cgroup CPU quota; at least 1.

    A fractional quota rounds down (as Go's automaxprocs does), so workers are not throttled.
    """
    quotas = [_v2_cpu_quota(d) for d in _cgroup_dirs(cgroup_root, self_cgroup, "")]
    quotas += [_v1_cpu_quota(d) for d in _cgroup_dirs(cgroup_root, self_cgroup, "cpu")]
    limits = [math.floor(q) for q in quotas if q is not None]
    return max(1, min([_affinity_cores(), *limits]))


def usable_memory_bytes(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """Memory this process may use: physical memory, capped by a cgroup v2 or v1 memory limit."""
    v2_dirs = _cgroup_dirs(cgroup_root, self_cgroup, "")
    v1_dirs = _cgroup_dirs(cgroup_root, self_cgroup, "memory")
    limits = [_read_int(d / "memory.max") for d in v2_dirs]
    limits += [_read_int(d / "memory.limit_in_bytes") for d in v1_dirs]
    physical_bytes: int = psutil.virtual_memory().total
    return min([physical_bytes, *(n for n in limits if n is not None)])


def free_disk_bytes(path: Path | str) -> int:
    """Free bytes on the volume that holds `path`, or would hold it; creates nothing."""
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return shutil.disk_usage(probe).free


def _affinity_cores() -> int:
    """Cores the scheduler lets this process run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - macOS and Windows


def _cgroup_dirs(cgroup_root: Path, self_cgroup: Path, controller: str) -> list[Path]:
    """The process's cgroup folder and its ancestors, those that exist; limits bind at each.

    `controller` is "" for cgroup v2 (one tree at the root), else a v1 controller whose tree
    is mounted at root/controller. Inside a container with its own cgroup namespace the
    process sits at the root of the tree, and a path that does not exist there is skipped.
    """
    mount = cgroup_root / controller if controller else cgroup_root
    parts = [part for part in _own_cgroup(self_cgroup, controller).split("/") if part]
    dirs = [mount.joinpath(*parts[:depth]) for depth in range(len(parts) + 1)]
    return [d for d in dirs if d.is_dir()]


def _own_cgroup(self_cgroup: Path, controller: str) -> str:
    """The process's cgroup path for a controller ("" for v2) from /proc/self/cgroup, or ""."""
    try:
        lines = self_cgroup.read_text().splitlines()
    except OSError:
        return ""
    for line in lines:
        hierarchy, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        v2_line = hierarchy == "0" and controllers == ""
        if (v2_line and not controller) or (controller and controller in controllers.split(",")):
            return path
    return ""


def _v2_cpu_quota(cgroup_dir: Path) -> float | None:
    """Cores allowed by a cgroup v2 `cpu.max` ("quota period", or "max period": none)."""
    try:
        quota, period = (cgroup_dir / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_cpu_quota(cgroup_dir: Path) -> float | None:
    """Cores allowed by a cgroup v1 CFS quota (-1: none)."""
    quota_us = _read_int(cgroup_dir / "cpu.cfs_quota_us")
    period_us = _read_int(cgroup_dir / "cpu.cfs_period_us")
    if quota_us is None or period_us is None or quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us


def _read_int(path: Path) -> int | None:
    """The integer in a cgroup file; None if missing, "max" or not a number."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
