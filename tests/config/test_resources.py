"""Cores, memory and disk this process may use, with cgroup files faked in tmp_path."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from modelhost.resources import free_disk_bytes, usable_cores, usable_memory_bytes

MiB = 1024**2


def affinity_cores() -> int:
    """Cores the scheduler gives this test process."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def fake_cgroup(root: Path, files: dict[str, str], own: str = "0::/\n") -> Path:
    """A cgroup tree under root holding files; returns the fake /proc/self/cgroup."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    self_cgroup = root / "self-cgroup"
    self_cgroup.write_text(own)
    return self_cgroup


@pytest.mark.parametrize(
    ("files", "quota_cores"),
    [
        ({"cpu.max": "200000 100000\n"}, 2),
        ({"cpu.max": "150000 100000\n"}, 1),  # a fractional quota rounds down
        ({"cpu.max": "50000 100000\n"}, 1),  # never below one
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_usable_cores(tmp_path: Path, files: dict[str, str], quota_cores: int | None) -> None:
    self_cgroup = fake_cgroup(tmp_path, files, "1:cpu,cpuacct:/\n0::/\n")
    expected = max(1, min(affinity_cores(), quota_cores or affinity_cores()))
    assert usable_cores(tmp_path, self_cgroup) == expected


def test_usable_cores_reads_the_process_own_cgroup(tmp_path: Path) -> None:
    files = {"cpu.max": "max 100000", "kubepods/pod1/cpu.max": "100000 100000"}
    self_cgroup = fake_cgroup(tmp_path, files, "0::/kubepods/pod1\n")
    assert usable_cores(tmp_path, self_cgroup) == 1


def test_usable_memory_capped_by_cgroup_v2(tmp_path: Path) -> None:
    self_cgroup = fake_cgroup(tmp_path, {"memory.max": f"{512 * MiB}\n"})
    assert usable_memory_bytes(tmp_path, self_cgroup) == 512 * MiB


def test_usable_memory_tightest_of_own_cgroup_and_ancestors(tmp_path: Path) -> None:
    files = {"memory.max": "max\n", "a/memory.max": f"{300 * MiB}\n", "a/b/memory.max": "max\n"}
    self_cgroup = fake_cgroup(tmp_path, files, "0::/a/b\n")
    assert usable_memory_bytes(tmp_path, self_cgroup) == 300 * MiB


def test_usable_memory_capped_by_cgroup_v1(tmp_path: Path) -> None:
    files = {"memory/docker/x/memory.limit_in_bytes": f"{256 * MiB}\n"}
    self_cgroup = fake_cgroup(tmp_path, files, "4:memory:/docker/x\n")
    assert usable_memory_bytes(tmp_path, self_cgroup) == 256 * MiB


@pytest.mark.parametrize(
    "files",
    [{"memory.max": "max\n"}, {"memory/memory.limit_in_bytes": "9223372036854771712\n"}, {}],
)
def test_unlimited_memory_is_physical_memory(tmp_path: Path, files: dict[str, str]) -> None:
    self_cgroup = fake_cgroup(tmp_path, files)
    assert usable_memory_bytes(tmp_path, self_cgroup) == psutil.virtual_memory().total


def test_free_disk_of_a_path_not_yet_created(tmp_path: Path) -> None:
    missing = tmp_path / "cache" / "models" / "m1"
    free_bytes = free_disk_bytes(missing)
    assert abs(free_bytes - shutil.disk_usage(tmp_path).free) < 256 * MiB
    assert not (tmp_path / "cache").exists()
