"""Fast copies, the worker's side: written only for scikit-learn models and within the room
given, read back to the same answers (OIP included), and a broken one never fails a load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.workers import fast_copy
from modelhost.workers.handlers import load_handler
from modelhost.workers.handlers.base import Handler, InferRequest
from modelhost.workers.messages import Load
from modelhost.workers.oip_media import oip_media_type

ROWS = testing.iris_rows(3)
OIP = {"inputs": [{"name": "x", "shape": [3, 4], "datatype": "FP64", "data": sum(ROWS, [])}]}


def answers(handler: Handler) -> tuple[bytes, bytes]:
    """Its answer to plain JSON rows and to an OIP request."""
    plain = handler.infer(InferRequest(json.dumps(ROWS).encode()))
    oip = handler.infer(InferRequest(json.dumps(OIP).encode(), oip_media_type(), oip_media_type()))
    return plain.body, json.loads(oip.body)["outputs"][0]["data"]


def request(artifact: Path, copy: Path, room: int) -> Load:
    return Load("m", str(artifact), fast_copy=str(copy), fast_copy_room=room)


@pytest.fixture
def artifact(tmp_path: Path) -> Path:
    return testing.iris_logreg(tmp_path / "model.joblib")


def test_a_copy_written_after_a_load_reads_back_to_the_same_answers(
    artifact: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.pickle"
    loaded = load_handler(artifact, "m")
    written = fast_copy.write(loaded, request(artifact, copy, 1 << 20))
    assert written == copy.stat().st_size > 0
    read = fast_copy.read(request(artifact, copy, 0))
    assert read is not None
    assert answers(read) == answers(loaded)
    assert fast_copy.read(request(artifact, copy, 1 << 20)) is None  # room: write, not read


def test_a_copy_past_its_room_is_not_written_and_leaves_nothing(
    artifact: Path, tmp_path: Path
) -> None:
    copies = tmp_path / "copies"
    copies.mkdir()
    loaded = load_handler(artifact, "m")
    assert fast_copy.write(loaded, request(artifact, copies / "copy.pickle", 100)) == 0
    assert not list(copies.iterdir())


def test_only_scikit_learn_models_get_a_copy(tmp_path: Path) -> None:
    folder = testing.mms_handler_folder(tmp_path / "mms")  # user code: its state is its own
    handler = load_handler(folder, "m")
    assert fast_copy.write(handler, request(folder, tmp_path / "copy.pickle", 1 << 20)) == 0
    assert not (tmp_path / "copy.pickle").exists()


def test_a_torn_copy_is_deleted_and_the_artifact_loads_instead(
    artifact: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "copy.pickle"
    fast_copy.write(load_handler(artifact, "m"), request(artifact, copy, 1 << 20))
    copy.write_bytes(copy.read_bytes()[: copy.stat().st_size // 2])
    assert fast_copy.read(request(artifact, copy, 0)) is None
    assert not copy.exists()
    assert fast_copy.read(request(artifact, tmp_path / "none.pickle", 0)) is None
