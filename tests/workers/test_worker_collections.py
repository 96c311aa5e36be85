"""A load or an unload beside many loaded models collects only young garbage: a full collection
walks every loaded model's objects. A model that only a full collection frees still leaves."""

from __future__ import annotations

import gc
import socket
import weakref
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from modelhost import testing
from modelhost.workers.messages import Load, Unload
from modelhost.workers.worker import Worker

MiB = 2**20
LOADED = 200


@pytest.fixture
def worker() -> Iterator[Worker]:
    ours, theirs = socket.socketpair()
    with ours, theirs:
        yield Worker(ours, 1, threads=1)


@pytest.fixture
def full_collections() -> Iterator[list[int]]:
    """Generation-2 collections started while the test runs; automatic ones off."""
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            started.append(1)

    gc.disable()
    gc.callbacks.append(count)
    try:
        yield started
    finally:
        gc.callbacks.remove(count)
        gc.enable()


def test_a_load_and_an_unload_beside_many_models_walk_no_old_objects(
    tmp_path: Path, worker: Worker, full_collections: list[int]
) -> None:
    path = testing.padded_logreg(tmp_path / "small.joblib", 4096)
    for k in range(LOADED):
        worker.load(Load(model=f"m{k}", path=str(path)))
    full_collections.clear()
    worker.load(Load(model="probe", path=str(path)))
    worker.unload(Unload("probe"))
    assert full_collections == []


def test_a_model_held_by_a_reference_cycle_is_freed_on_unload(tmp_path: Path) -> None:
    model = testing.padded_logreg(tmp_path / "base.joblib", 8 * MiB)
    cyclic = testing.dump(_with_cycle(model), tmp_path / "cyclic.joblib")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, 1, threads=1)
        loaded = worker.load(Load(model="cyclic", path=str(cyclic)))
        held = weakref.ref(worker.models["cyclic"].model)  # type: ignore[attr-defined]
        freed = worker.unload(Unload("cyclic")).freed
    assert held() is None
    assert freed >= 0.9 * loaded.footprint, (freed, loaded.footprint)


def _with_cycle(path: Path) -> object:
    import joblib

    model = joblib.load(path)
    model.self_ = model  # the model refers to itself: refcounts alone never free it
    assert isinstance(model.padding_, np.ndarray)
    return model
