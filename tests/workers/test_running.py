"""A worker's record of what it runs, as its pool reads it once the worker is gone."""

from __future__ import annotations

from pathlib import Path

from modelhost.names import MAX_NAME_BYTES
from modelhost.workers.running import LOAD, SLOT_BYTES, Record, Running, read_running


def test_the_pool_reads_the_batches_and_load_running_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "running-1"
    running = Running(path, 3)
    first = running.begin("tenants/t1/a.joblib")
    running.begin("b" * MAX_NAME_BYTES)
    running.begin("c.joblib", LOAD)
    running.end(first)
    assert read_running(path) == Record(frozenset({"b" * MAX_NAME_BYTES}), "c.joblib")


def test_a_slot_ended_is_reused_and_none_past_the_slots_is_written(tmp_path: Path) -> None:
    path = tmp_path / "running-1"
    running = Running(path, 1)
    running.end(running.begin("a"))
    assert running.begin("b") == 0
    assert running.begin("c") == -1  # every slot held: nothing written, nothing lost
    running.end(-1)
    assert read_running(path) == Record(frozenset({"b"}))


def test_a_record_cut_short_or_garbled_names_nothing_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "running-1"
    Running(path, 1).begin("a")
    garbled = b"B\xff\xff".ljust(SLOT_BYTES, b"x")  # a length past any name
    path.write_bytes(path.read_bytes() + garbled + b"B\x00\x05ab")  # and a slot cut short
    assert read_running(path) == Record(frozenset({"a"}))
    assert read_running(tmp_path / "never-written") == Record(frozenset())
