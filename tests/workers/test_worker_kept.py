"""A worker's unload says what it keeps past its idle size once its last model has left."""

from __future__ import annotations

import gc
import socket
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.records.memory import allocated_bytes
from modelhost.workers.messages import Load, Unload
from modelhost.workers.worker import Worker

KEPT_BYTES = 80 * 2**20


@pytest.mark.skipif(allocated_bytes() is None, reason="needs glibc's allocation counts")
def test_memory_kept_is_told_when_the_last_model_leaves(tmp_path: Path) -> None:
    path = testing.iris_logreg(tmp_path / "iris.joblib")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, worker_id=1, threads=1)
        gc.collect()  # garbage of earlier tests in this process is not the worker's
        worker.idle_bytes = allocated_bytes() or 0
        worker.load(Load(model="a", path=str(path)))
        worker.load(Load(model="b", path=str(path)))
        kept = b"k" * KEPT_BYTES  # as a handler's cache in a library's global
        first = worker.unload(Unload("a"))
        last = worker.unload(Unload("b"))
        del kept
    assert first.kept == 0  # with a model left, what is kept may be its runtime's
    assert last.kept >= KEPT_BYTES * 3 // 4  # other tests' leftovers move the count a little
