"""A worker's memory past its models, charged to the batches that kept it."""

from __future__ import annotations

import os
import time

from modelhost.records.memory import return_memory_to_os
from modelhost.workers import kept_memory
from modelhost.workers.kept_memory import KeptMemory
from modelhost.workers.messages import Grown

MIB = 1 << 20


def touched(mib: int) -> bytearray:
    kept = bytearray(mib * MIB)
    kept[::4096] = b"x" * len(kept[::4096])
    return kept


def started(max_mib: int) -> KeptMemory:
    """Started as a worker is, once its rehearsal's memory is returned: a confirmation's trim
    would otherwise return this process's earlier tests' freed heap and hide what is kept."""
    return_memory_to_os()
    kept = KeptMemory(max_mib * MIB)
    kept.start()
    return kept


def test_a_batch_keeping_past_the_limit_is_confirmed_then_said_naming_its_model() -> None:
    kept, said = started(16), list[Grown]()
    kept.say = said.append
    kept.after_batch("fine")
    held = touched(32)
    kept.after_batch("leaks")
    assert kept.confirming and not said  # said once freed heap is returned
    deadline = time.monotonic() + 10.0
    while not said and time.monotonic() < deadline:
        time.sleep(0.05)
    [grown] = said
    assert grown.model == "leaks" and grown.limit == 16 * MIB
    assert grown.bytes >= 24 * MIB and grown.kept >= 30 * MIB, grown
    kept.after_batch("leaks")  # the pool replaces the worker: said no more
    time.sleep(2 * kept_memory.CONFIRM_AFTER_S)
    assert len(said) == 1
    del held


def test_memory_freed_before_the_confirmation_is_not_said() -> None:
    """A large batch's inputs: past the limit as it ends, gone once it has answered."""
    kept = started(16)
    held = touched(32)
    kept.after_batch("large inputs")
    del held
    assert kept.confirm() is None and not kept.confirming


def test_what_a_load_allocates_is_its_footprint_not_a_batch_s() -> None:
    kept = started(16)
    model = touched(32)
    kept.settled(len(model))
    kept.after_batch("loaded")
    assert not kept.confirming and kept.kept_by.get("loaded", 0) < 8 * MIB


def test_an_unloaded_model_s_batches_are_forgotten() -> None:
    kept = started(64)
    held = touched(8)
    kept.after_batch("gone")
    assert kept.kept_by["gone"] >= 7 * MIB
    del held
    kept.settled(0, unloaded="gone")
    assert "gone" not in kept.kept_by


def test_no_limit_reads_nothing() -> None:
    kept = started(0)
    held = touched(32)
    kept.after_batch("leaks")
    assert not kept.kept_by and not kept.confirming
    del held


def test_a_file_closed_under_it_reads_as_nothing_kept() -> None:
    """A model's code may close any descriptor of its worker."""
    kept = started(16)
    os.close(kept._statm)
    held = touched(32)
    kept.after_batch("closes")
    assert not kept.confirming
    del held
