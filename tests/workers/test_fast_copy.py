"""Fast copies, the worker's side: written only for scikit-learn models and within the room
given, read back to the same answers (OIP included), and a broken one never fails a load."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from modelhost import testing
from modelhost.cache.fast_copies import room_for
from modelhost.workers import fast_copy
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.handlers.sklearn import SklearnHandler
from modelhost.workers.messages import Load
from modelhost.workers.oip_media import oip_media_type

ROWS = testing.iris_rows(3)
FOOTPRINT = 64 << 10  # what a worker measures an iris model at, roughly
MiB = 1 << 20
OIP = {"inputs": [{"name": "x", "shape": [3, 4], "datatype": "FP64", "data": sum(ROWS, [])}]}


def answers(handler: Handler) -> tuple[bytes, bytes]:
    """Its answer to plain JSON rows and to an OIP request."""
    plain = handler.infer(InferRequest(json.dumps(ROWS).encode()))
    oip = handler.infer(InferRequest(json.dumps(OIP).encode(), oip_media_type(), oip_media_type()))
    return plain.body, json.loads(oip.body)["outputs"][0]["data"]


def request(artifact: Path, copy: Path, room: int) -> Load:
    return Load(model="m", path=str(artifact), fast_copy=str(copy), fast_copy_room=room)


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    return testing.iris_logreg(tmp_path / "model.joblib")


def test_copy_reads_back_the_same_answers(artifact: Path, tmp_path: Path) -> None:
    """A copy written after a load reads back to the same answers."""
    copy = tmp_path / "copy.pickle"
    loaded = load_handler(artifact, "m")
    written = fast_copy.write(loaded, request(artifact, copy, 1 << 20), FOOTPRINT)
    assert written == copy.stat().st_size > 0
    read = fast_copy.read(request(artifact, copy, 0))
    assert read is not None
    assert answers(read) == answers(loaded)
    assert fast_copy.read(request(artifact, copy, 1 << 20)) is None  # room: write, not read


def test_copy_past_its_room_is_not_written(artifact: Path, tmp_path: Path) -> None:
    """A copy past its room is not written and leaves nothing."""
    copies = tmp_path / "copies"
    copies.mkdir()
    loaded = load_handler(artifact, "m")
    assert fast_copy.write(loaded, request(artifact, copies / "copy.pickle", 100), FOOTPRINT) == 0
    assert not list(copies.iterdir())


def test_only_scikit_learn_models_get_a_copy(tmp_path: Path) -> None:
    folder = testing.mms_handler_folder(tmp_path / "mms")  # user code: its state is its own
    handler = load_handler(folder, "m")
    assert (
        fast_copy.write(handler, request(folder, tmp_path / "copy.pickle", 1 << 20), FOOTPRINT) == 0
    )
    assert not (tmp_path / "copy.pickle").exists()


def test_torn_copy_falls_back_to_the_artifact(artifact: Path, tmp_path: Path) -> None:
    """A torn copy is deleted and the artifact loads instead."""
    copy = tmp_path / "copy.pickle"
    fast_copy.write(load_handler(artifact, "m"), request(artifact, copy, 1 << 20), FOOTPRINT)
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 2])
    assert fast_copy.read(request(artifact, copy, 0)) is None
    assert not copy.exists()
    assert fast_copy.read(request(artifact, tmp_path / "none.pickle", 0)) is None


PEAK_OF_A_LOAD = """
import gc, sys
from modelhost.records.memory import allocated_bytes, reset_peak_rss, rss_and_peak_bytes
from modelhost.workers import fast_copy
from modelhost.workers.messages import Load
import sklearn.ensemble
gc.collect()
reset_peak_rss()
rss, _ = rss_and_peak_bytes()
allocated = allocated_bytes()
handler = fast_copy.read(Load(model="m", path=sys.argv[1], fast_copy=sys.argv[1]))
assert handler is not None
print((rss_and_peak_bytes()[1] - rss) / (allocated_bytes() - allocated))
"""


def test_forest_copy_loads_at_its_size(tmp_path: Path) -> None:
    """A forest's copy loads at about its size, not twice.

    The unpickler's memo would keep every tree's arrays until the load ends (a peak of 2x the
    model, reserved by each load of it); the copy is written without one, within the room the
    disk tier offers (a copy without a memo is a few % larger than the artifact)."""
    forest = testing.random_forest(tmp_path / "forest.joblib", 4 * MiB)
    copy = tmp_path / "copy.pickle"
    handler = load_handler(forest, "m")
    room = room_for(forest.stat().st_size)
    assert fast_copy.write(handler, request(forest, copy, room), 4 * MiB) > 0
    run = subprocess.run(
        [sys.executable, "-c", PEAK_OF_A_LOAD, str(copy)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert float(run.stdout) < 1.4  # peak over footprint; 2.0 with a memo


@pytest.mark.parametrize("shape", ["shared", "cyclic"])
def test_copy_keeps_shared_and_cyclic_parts(artifact: Path, tmp_path: Path, shape: str) -> None:
    """A model with shared or cyclic parts gets a copy that keeps them.

    Without a memo a shared part would be copied once per reference (and a cycle never
    ends): such a model gets the memoized copy, the same objects as loaded."""
    model = load_handler(artifact, "m").inner.model  # type: ignore[attr-defined]
    part = np.zeros(MiB)  # 8 MiB
    model.first, model.second = (part, part) if shape == "shared" else (model, part)
    copy = tmp_path / "copy.pickle"
    written = fast_copy.write(SklearnHandler(model), request(artifact, copy, 64 * MiB), 8 * MiB)
    assert 8 * MiB < written < 9 * MiB  # the part once
    read = fast_copy.read(request(artifact, copy, 0))
    assert read is not None
    copied = read.inner.model  # type: ignore[attr-defined]
    assert (copied.first is copied.second) if shape == "shared" else (copied.first is copied)
    assert (
        answers(read)[0]
        == SklearnHandler(model).infer(InferRequest(json.dumps(ROWS).encode())).body
    )
