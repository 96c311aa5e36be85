"""What a sandboxed worker's scratch folder holds, as its watch reads it."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import pytest

from modelhost.workers.pool.scratch import scratch_use

MIB = 1 << 20


def test_the_disk_allocated_counts_not_the_sizes_claimed(tmp_path: Path) -> None:
    with open(tmp_path / "sparse", "wb") as sparse:
        sparse.truncate(1 << 40)  # a terabyte claimed, nothing allocated
    (tmp_path / "inner").mkdir()
    with open(tmp_path / "inner" / "full", "wb") as full:
        os.posix_fallocate(full.fileno(), 0, 8 * MIB)
    use = scratch_use(tmp_path)
    assert 8 * MIB <= use.bytes < 9 * MIB and use.entries == 3


def test_a_link_out_of_the_folder_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "large").write_bytes(b"x" * MIB)
    (tmp_path / "scratch").mkdir()
    (tmp_path / "scratch" / "link").symlink_to(outside, target_is_directory=True)
    assert scratch_use(tmp_path / "scratch").bytes < MIB


def test_a_reading_stops_past_its_entries_within_a_folder(tmp_path: Path) -> None:
    for number in range(50):
        (tmp_path / f"file-{number}").touch()
    assert scratch_use(tmp_path, most_entries=10).entries == 11


def test_a_folder_gone_reads_as_empty(tmp_path: Path) -> None:
    assert scratch_use(tmp_path / "gone") == (0, 0)


def test_an_entry_gone_as_it_is_read_leaves_the_rest_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A model deleting and writing a file again cannot cut the reading short."""
    for name in ("a", "b"):
        with open(tmp_path / name, "wb") as full:
            os.posix_fallocate(full.fileno(), 0, MIB)
    real_scandir = os.scandir

    def first_vanishes(path: str) -> object:
        entries = list(real_scandir(path))
        os.remove(entries[0].path)
        return contextlib.nullcontext(iter(entries))

    monkeypatch.setattr(os, "scandir", first_vanishes)
    assert MIB <= scratch_use(tmp_path).bytes < 2 * MIB
