"""A worker gives its heap back after a large request, and only then."""

from __future__ import annotations

import socket
import time

import pytest

from modelhost.records import memory
from modelhost.workers import worker as worker_module
from modelhost.workers.messages import Infer, Item, encode
from modelhost.workers.wire import Frame

QUIET_S = memory.HeapTrimmer().quiet_s


def counted_trims(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    trims: list[float] = []
    monkeypatch.setattr(memory, "trim_heap", lambda: trims.append(time.monotonic()))
    return trims


def answer_once(monkeypatch: pytest.MonkeyPatch, body_bytes: int) -> int:
    """Answer one request of `body_bytes` (to a model not loaded); how many trims followed."""
    trims = counted_trims(monkeypatch)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = worker_module.Worker(ours, worker_id=1, threads=1)
        item = Item("application/json", "application/json", {}, body_bytes)
        request = Infer("absent", (item,))
        worker._answer(Frame(7, encode(request), b"0" * body_bytes), request)
        time.sleep(QUIET_S * 10)
    return len(trims)


def test_a_small_request_leaves_the_heap_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_once(monkeypatch, 1024) == 0


def test_a_large_request_gives_the_heap_back(monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_once(monkeypatch, worker_module.TRIM_AFTER_BYTES) == 1


def test_large_bodies_together_are_trimmed_once_after_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each body is still held while its own reply goes out, and the others' a moment longer:
    the trim waits until they have all been let go."""
    trims = counted_trims(monkeypatch)
    trimmer = memory.HeapTrimmer(quiet_s=0.5)
    for _ in range(5):
        trimmer.due()
        time.sleep(0.01)
    assert trims == []
    time.sleep(1.5)
    assert len(trims) == 1
