"""A load's footprint is the model's, whatever the worker did before or does meanwhile: loads
that fill the holes of earlier unloads, and inference running on another thread, must not move
it by more than 10% from the same model's footprint in a fresh worker."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import joblib
import numpy as np
import pytest

from modelhost import testing
from modelhost.workers.messages import Load, Unload
from modelhost.workers.worker import Worker

MiB = 2**20


@pytest.fixture(scope="module")
def forests(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = tmp_path_factory.mktemp("forests")
    return [
        testing.random_forest(root / f"f{seed}.joblib", 4 * MiB, seed=seed) for seed in range(5)
    ]


@pytest.fixture
def worker() -> Iterator[Worker]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        yield Worker(ours, 1, threads=1)


def footprint(worker: Worker, path: Path, name: str) -> int:
    return worker.load(Load(model=name, path=str(path))).footprint


def test_load_after_unloads_measures_as_fresh(forests: list[Path], worker: Worker) -> None:
    """A load after unloads measures what a fresh load does."""
    footprint(worker, forests[1], "warm-up")  # the runtime's first-use costs are not a model's
    worker.unload(Unload("warm-up"))
    fresh = footprint(worker, forests[0], "first")
    for index, path in enumerate(forests[1:]):
        footprint(worker, path, f"other-{index}")
    worker.unload(Unload("first"))
    for index in (0, 2):  # holes between models still loaded
        worker.unload(Unload(f"other-{index}"))
    again = footprint(worker, forests[0], "again")
    assert abs(again - fresh) <= 0.1 * fresh, (fresh, again)


def test_other_thread_inference_is_not_the_load(forests: list[Path], worker: Worker) -> None:
    """Inference on another thread does not count as the load."""
    footprint(worker, forests[1], "warm-up")
    alone = footprint(worker, forests[0], "alone")
    worker.unload(Unload("alone"))
    model, rows = joblib.load(forests[2]), np.asarray(testing.digits_rows(64))
    done = threading.Event()

    def infer() -> None:
        while not done.is_set():
            model.predict_proba(rows)

    thread = threading.Thread(target=infer)
    thread.start()
    try:
        meanwhile = footprint(worker, forests[0], "meanwhile")
    finally:
        done.set()
        thread.join()
    assert abs(meanwhile - alone) <= 0.1 * alone, (alone, meanwhile)


def test_an_unload_on_its_own_thread_is_not_the_load(forests: list[Path], worker: Worker) -> None:
    """Unloads run beside loads on a thread of their own; a load's footprint is still its own."""
    footprint(worker, forests[1], "warm-up")
    alone = footprint(worker, forests[0], "alone")
    worker.unload(Unload("alone"))
    for index in range(3):
        footprint(worker, forests[2 + index], f"leaving-{index}")
    unloads = ThreadPoolExecutor(1)
    started = threading.Event()

    def unload_all() -> None:
        started.set()
        for index in range(3):
            worker.unload(Unload(f"leaving-{index}"))

    pending = unloads.submit(unload_all)
    started.wait()
    meanwhile = footprint(worker, forests[0], "meanwhile")
    pending.result()
    unloads.shutdown()
    assert abs(meanwhile - alone) <= 0.1 * alone, (alone, meanwhile)
