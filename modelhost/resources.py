"""Cores, memory and disk this process may use, within its cgroup limits."""

from __future__ import annotations

import contextlib
import math
import os
import resource
import shutil
import sys
from pathlib import Path

import psutil

CGROUP_ROOT = Path("/sys/fs/cgroup")
OPEN_FILES_CEILING = 1 << 20  # Linux's fs.nr_open default
SELF_CGROUP = Path("/proc/self/cgroup")


def usable_cores(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """CPU affinity capped by the cgroup quota, rounded down so workers are not throttled."""
    quotas = [_v2_cpu_quota(d) for d in _cgroup_dirs(cgroup_root, self_cgroup, "")]
    quotas += [_v1_cpu_quota(d) for d in _cgroup_dirs(cgroup_root, self_cgroup, "cpu")]
    limits = [math.floor(q) for q in quotas if q is not None]
    return max(1, min([_affinity_cores(), *limits]))


def most_open_files() -> None:
    """Raise the soft limit on open files (a connection is one) to the hard one, as Go does."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = hard if hard != resource.RLIM_INFINITY else max(soft, OPEN_FILES_CEILING)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


def nicer_thread(by: int) -> None:
    """Lower the calling thread's CPU priority by `by`, where Linux allows."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError):  # 0: the calling thread
        niceness = os.getpriority(os.PRIO_PROCESS, 0) + by
        os.setpriority(os.PRIO_PROCESS, 0, min(niceness, 19))


def usable_memory_bytes(cgroup_root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """Physical memory capped by the cgroup limit."""
    v2_dirs = _cgroup_dirs(cgroup_root, self_cgroup, "")
    v1_dirs = _cgroup_dirs(cgroup_root, self_cgroup, "memory")
    limits = [_read_int(d / "memory.max") for d in v2_dirs]
    limits += [_read_int(d / "memory.limit_in_bytes") for d in v1_dirs]
    physical_bytes: int = psutil.virtual_memory().total
    return min([physical_bytes, *(n for n in limits if n is not None)])


def free_disk_bytes(path: Path | str) -> int:
    """Free bytes on the volume that holds `path`, or would hold it."""
    return shutil.disk_usage(_existing(path)).free


def disk_size_bytes(path: Path | str) -> int:
    """The size of the volume that holds `path`, or would hold it."""
    return shutil.disk_usage(_existing(path)).total


def _existing(path: Path | str) -> Path:
    probe = Path(path).absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _affinity_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1  # pragma: no cover - macOS and Windows


def _cgroup_dirs(cgroup_root: Path, self_cgroup: Path, controller: str) -> list[Path]:
    """The process's cgroup folder and its existing ancestors: a limit binds at each.

    `controller` is "" for cgroup v2. A container's own namespace hides some paths.
    """
    mount = cgroup_root / controller if controller else cgroup_root
    parts = [part for part in _own_cgroup(self_cgroup, controller).split("/") if part]
    dirs = [mount.joinpath(*parts[:depth]) for depth in range(len(parts) + 1)]
    return [d for d in dirs if d.is_dir()]


def _own_cgroup(self_cgroup: Path, controller: str) -> str:
    """The process's cgroup path for a controller, from /proc/self/cgroup."""
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
    """Cores allowed by a cgroup v2 `cpu.max`."""
    try:
        quota, period = (cgroup_dir / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError, ZeroDivisionError):
        return None


def _v1_cpu_quota(cgroup_dir: Path) -> float | None:
    quota_us = _read_int(cgroup_dir / "cpu.cfs_quota_us")
    period_us = _read_int(cgroup_dir / "cpu.cfs_period_us")
    if quota_us is None or period_us is None or quota_us <= 0 or period_us <= 0:
        return None
    return quota_us / period_us


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None
