"""A worker gives its heap back after a large request, and only then."""

from __future__ import annotations

import socket

import pytest

from modelhost.workers import worker as worker_module
from modelhost.workers.messages import Infer, Item, encode
from modelhost.workers.wire import Frame


def answer_once(monkeypatch: pytest.MonkeyPatch, body_bytes: int) -> int:
    """Answer one request of `body_bytes` (to a model not loaded); how many trims followed."""
    trims: list[None] = []
    monkeypatch.setattr(worker_module, "return_memory_to_os", lambda: trims.append(None))
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = worker_module.Worker(ours, worker_id=1, threads=1)
        item = Item("application/json", "application/json", {}, body_bytes)
        request = Infer("absent", (item,))
        worker._answer(Frame(7, encode(request), b"0" * body_bytes), request)
    return len(trims)


def test_a_small_request_leaves_the_heap_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_once(monkeypatch, 1024) == 0


def test_a_large_request_gives_the_heap_back(monkeypatch: pytest.MonkeyPatch) -> None:
    assert answer_once(monkeypatch, worker_module.TRIM_AFTER_BYTES) == 1
