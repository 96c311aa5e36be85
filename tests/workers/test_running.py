"""A worker's record of what it runs, as its pool reads it once the worker is gone."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modelhost.names import MAX_NAME_BYTES
from modelhost.workers.running import (
    BATCH,
    LOAD,
    SLOT_BYTES,
    Record,
    Running,
    forget,
    paths,
    read_running,
)


def test_the_pool_reads_the_batches_and_load_running_at_the_end(tmp_path: Path) -> None:
    running = Running(tmp_path, 1, 3)
    first = running.begin("tenants/t1/a.joblib")
    running.begin("b" * MAX_NAME_BYTES)
    running.begin("c.joblib", LOAD)
    running.end(first)
    record = read_running(tmp_path, 1)
    assert record == Record(frozenset({"b" * MAX_NAME_BYTES}), "c.joblib")
    forget(tmp_path, 1)
    assert not any(path.exists() for path in paths(tmp_path, 1))
    assert read_running(tmp_path, 1) == Record(frozenset())


def test_a_slot_ended_is_reused_and_none_past_the_slots_is_written(tmp_path: Path) -> None:
    running = Running(tmp_path, 1, 1)
    running.end(running.begin("a"))
    assert running.begin("b") == 0
    assert running.begin("c") == -1  # every slot held: nothing written, nothing lost
    running.end(-1)
    assert read_running(tmp_path, 1) == Record(frozenset({"b"}))


def test_a_record_cut_short_or_garbled_names_nothing_it_cannot_read(tmp_path: Path) -> None:
    Running(tmp_path, 1, 1).begin("a")
    slots, _ = paths(tmp_path, 1)
    garbled = (BATCH + bytes(8) + b"\xff\xff").ljust(SLOT_BYTES, b"x")  # past any name
    slots.write_bytes(slots.read_bytes() + garbled + BATCH + bytes(8) + b"\x00\x05ab")
    assert read_running(tmp_path, 1) == Record(frozenset({"a"}))


CRASHING_THREAD = """
import ctypes, os, sys, threading, time
from pathlib import Path
from modelhost.workers.running import Running, dump_faults

running = Running(Path(sys.argv[1]), 1, 2)
dump_faults(Path(sys.argv[1]), 1)
def run(model, crash):
    with running.of(model):
        time.sleep(0.3) if not crash else CRASH
beside = threading.Thread(target=run, args=("beside", False))
beside.start()
time.sleep(0.05)
threading.Thread(target=run, args=("crashing", True)).start()
beside.join()
"""


@pytest.mark.parametrize(
    ("crash", "code", "said"),
    [
        ("ctypes.string_at(0)", -signal.SIGSEGV, "Segmentation fault"),
        ("os._exit(3)", 3, "called os._exit(3)"),
        ("__import__('posix')._exit(3)", 3, "called os._exit(3)"),
    ],
)
def test_a_fatal_signal_or_an_exit_names_its_thread_and_that_thread_s_model(
    tmp_path: Path, crash: str, code: int, said: str
) -> None:
    """Two batches run; one thread crashes in native code, or exits: the record says which."""
    script = textwrap.dedent(CRASHING_THREAD).replace("CRASH", crash)
    ended = subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=False)
    assert ended.returncode == code
    record = read_running(tmp_path, 1)
    assert record[:3] == (frozenset({"beside", "crashing"}), "", (BATCH, "crashing"))
    assert said in record.dump and "line 10" in record.dump
