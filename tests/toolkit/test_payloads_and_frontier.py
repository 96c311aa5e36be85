"""Payload files of every kind, the efficient frontier, and reading usage from /metrics text."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest

from modelhost.toolkit.payloads import NPY, Payload, payloads_by_model, read_payloads
from modelhost.toolkit.ramp import efficient_frontier
from modelhost.toolkit.resources import parse_usage


def test_folder_sends_files_as_they_are(tmp_path: Path) -> None:
    """A folder sends each file as it is with its type."""
    (tmp_path / "a.npy").write_bytes(b"\x93NUMPY")
    (tmp_path / "b.csv").write_text("1,2\n")
    (tmp_path / "c.jpg").write_bytes(b"\xff\xd8\xff")
    (tmp_path / "d.wav").write_bytes(b"RIFF")
    (tmp_path / "e.bin").write_bytes(b"\x00")
    (tmp_path / ".hidden").write_text("x")
    found = [(p.body, p.content_type) for p in read_payloads(tmp_path)]
    assert [t for _, t in found] == [
        NPY,
        "text/csv",
        "image/jpeg",
        "audio/x-wav",
        "application/octet-stream",
    ]
    assert found[2][0] == b"\xff\xd8\xff"


def test_an_npz_is_one_npy_body_per_array(tmp_path: Path) -> None:
    arrays = {"first": np.arange(4.0).reshape(1, 4), "second": np.ones((3, 4))}
    np.savez(tmp_path / "batch.npz", **arrays)
    payloads = read_payloads(tmp_path / "batch.npz")
    assert [p.content_type for p in payloads] == [NPY, NPY]
    for payload, expected in zip(payloads, arrays.values(), strict=True):
        assert np.array_equal(np.load(io.BytesIO(payload.body)), expected)
    np.save(tmp_path / "one.npy", arrays["second"])
    (single,) = read_payloads(tmp_path / "one.npy")
    assert single.body == (tmp_path / "one.npy").read_bytes() and single.content_type == NPY


def test_an_empty_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="holds no files"):
        read_payloads(tmp_path)


def test_the_frontier_keeps_only_points_nothing_beats_on_both() -> None:
    points = [(10.0, 5.0), (20.0, 3.0), (15.0, 6.0), (30.0, 3.0), (5.0, 9.0), (8.0, math.inf)]
    assert efficient_frontier(points) == [4, 0, 1]


def test_usage_sums_frontend_and_worker_cpu_and_reads_pss() -> None:
    text = "\n".join(
        [
            "# HELP modelhost_process_cpu_seconds_total Total user and system CPU time",
            "modelhost_process_cpu_seconds_total 1.5",
            'modelhost_worker_cpu_seconds_total{worker="0"} 2.0',
            'modelhost_worker_cpu_seconds_total{worker="1"} 0.25',
            "modelhost_memory_used_bytes 1.2e+08",
            "modelhost_memory_budget_bytes 2e+09",
        ]
    )
    assert parse_usage(text) == (3.75, 1.2e8)


def test_pickled_arrays_are_npy_bodies(tmp_path: Path) -> None:
    """A pickled list of arrays is one npy body per array."""
    import pickle

    arrays = [np.arange(4.0).reshape(1, 4), np.ones((2, 4))]
    (tmp_path / "batch.pkl").write_bytes(pickle.dumps(arrays))
    payloads = read_payloads(tmp_path / "batch.pkl")
    assert [p.content_type for p in payloads] == ["application/x-npy"] * 2
    loaded = [np.load(io.BytesIO(p.body), allow_pickle=False) for p in payloads]
    assert all(np.array_equal(a, b) for a, b in zip(arrays, loaded, strict=True))
    (tmp_path / "odd.pkl").write_bytes(pickle.dumps({"not": "arrays"}))
    with pytest.raises(ValueError, match="array or a list of arrays"):
        read_payloads(tmp_path / "odd.pkl")


def test_a_json_line_may_name_its_model(tmp_path: Path) -> None:
    """SageMaker's TargetModel in a line makes it that model's payload only."""
    lines = tmp_path / "payloads.jsonl"
    lines.write_text(
        '{"Body": [1, 2], "TargetModel": "a.joblib"}\n{"Body": "x,y", "ContentType": "text/csv"}\n'
    )
    own, shared = read_payloads(lines)
    assert (own.model, own.body) == ("a.joblib", b"[1, 2]")
    assert (shared.model, shared.content_type) == ("", "text/csv")


def test_each_model_gets_its_own_payloads_else_the_shared_ones() -> None:
    own, other, shared = Payload(b"1", model="a"), Payload(b"2", model="b"), Payload(b"3")
    chosen = payloads_by_model(["a", "c"], [own, other, shared])
    assert chosen == {"a": (own,), "c": (shared,)}


def test_a_model_with_no_payload_to_send_is_named() -> None:
    with pytest.raises(ValueError, match="c.joblib has no payload"):
        payloads_by_model(["a.joblib", "c.joblib"], [Payload(b"1", model="a.joblib")])


def test_a_line_naming_a_model_without_a_body_is_refused(tmp_path: Path) -> None:
    lines = tmp_path / "payloads.jsonl"
    lines.write_text('{"Body": [1]}\n{"TargetModel": "a.joblib", "body": [1, 2]}\n')
    with pytest.raises(
        ValueError, match='payloads.jsonl:2: a line naming its TargetModel needs its "Body"'
    ):
        read_payloads(lines)


@pytest.mark.parametrize("command", ["bench", "tune"])
def test_a_models_file_that_is_not_there_is_a_usage_error(command: str, tmp_path: Path) -> None:
    """--models @models.txt with a typo in the name ended in a FileNotFoundError traceback."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    where = ["http://127.0.0.1:9"] if command == "bench" else ["--model-store", str(tmp_path)]
    args = [command, *where, "--models", f"@{tmp_path}/models.txt", "--concurrency", "1"]
    result = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "models.txt" in result.output and "one model name a line" in result.output
