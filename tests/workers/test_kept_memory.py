"""A worker's memory past its models, charged to the batches that kept it."""

from __future__ import annotations

import os

from modelhost.workers.kept_memory import KeptMemory

MIB = 1 << 20


def touched(mib: int) -> bytearray:
    kept = bytearray(mib * MIB)
    kept[::4096] = b"x" * len(kept[::4096])
    return kept


def started(max_mib: int) -> KeptMemory:
    kept = KeptMemory(max_mib * MIB)
    kept.start()
    return kept


def test_a_batch_keeping_past_the_limit_is_said_once_naming_its_model() -> None:
    kept = started(16)
    assert kept.after_batch("fine") is None
    held = touched(32)
    grown = kept.after_batch("leaks")
    assert grown is not None and grown.model == "leaks" and grown.limit == 16 * MIB
    assert grown.bytes >= 30 * MIB and grown.kept >= 30 * MIB, grown
    assert kept.after_batch("leaks") is None  # the pool replaces the worker
    del held


def test_what_a_load_allocates_is_its_footprint_not_a_batch_s() -> None:
    kept = started(16)
    model = touched(32)
    kept.settled(len(model))
    assert kept.after_batch("loaded") is None
    assert kept.kept_by.get("loaded", 0) < 8 * MIB


def test_an_unloaded_model_s_batches_are_forgotten() -> None:
    kept = started(64)
    held = touched(8)
    assert kept.after_batch("gone") is None
    assert kept.kept_by["gone"] >= 7 * MIB
    del held
    kept.settled(0, unloaded="gone")
    assert "gone" not in kept.kept_by


def test_no_limit_reads_nothing() -> None:
    kept = started(0)
    held = touched(32)
    assert kept.after_batch("leaks") is None and not kept.kept_by
    del held


def test_a_file_closed_under_it_reads_as_nothing_kept() -> None:
    """A model's code may close any descriptor of its worker."""
    kept = started(16)
    os.close(kept._statm)
    held = touched(32)
    assert kept.after_batch("closes") is None
    del held
