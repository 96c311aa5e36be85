"""The runtimes each cached model needed, kept in the disk index for the next start's template:
noted after a load, kept when the artifact is fetched again, gone with its row, and read at start
without opening the index for writing."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from modelhost.cache.disk_index import INDEX_FILE, SCHEMA, DiskIndex, Row
from modelhost.cache.disk_runtimes import cached_runtimes
from modelhost.cache.disk_tenants import migrate


def row(name: str) -> Row:
    return Row(name, f"{name}-folder", "model.mar", 1024, "s3://b", None, 0, 0)


def test_noted_runtimes_are_read_at_the_next_start(tmp_path: Path) -> None:
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.put_many([row("a.mar"), row("b.joblib"), row("c.onnx")])
    index.note_runtimes("a.mar", ("torch", "torchserve"))
    index.note_runtimes("b.joblib", ("sklearn",))
    index.put_many([row("a.mar")])  # fetched again: the same model, the same runtimes
    index.close()
    assert cached_runtimes(tmp_path / INDEX_FILE) == ("sklearn", "torch", "torchserve")


def test_a_removed_artifact_takes_its_runtimes_with_it(tmp_path: Path) -> None:
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.put_many([row("a.mar"), row("b.joblib")])
    index.note_runtimes("a.mar", ("torch", "torchserve"))
    index.note_runtimes("b.joblib", ("sklearn",))
    index.remove("a.mar")
    index.close()
    assert cached_runtimes(tmp_path / INDEX_FILE) == ("sklearn",)


def test_no_index_or_an_earlier_ones_has_none(tmp_path: Path) -> None:
    assert cached_runtimes(tmp_path / INDEX_FILE) == ()
    earlier = sqlite3.connect(tmp_path / INDEX_FILE, isolation_level=None)
    earlier.executescript(SCHEMA)
    migrate(earlier)  # the tenants' column, as the previous version left it
    earlier.close()
    assert cached_runtimes(tmp_path / INDEX_FILE) == ()
    DiskIndex(tmp_path / INDEX_FILE).close()  # an earlier index gains the column
    assert cached_runtimes(tmp_path / INDEX_FILE) == ()


def test_an_unreadable_index_has_none(tmp_path: Path) -> None:
    (tmp_path / INDEX_FILE).write_bytes(b"not a database" * 100)
    assert cached_runtimes(tmp_path / INDEX_FILE) == ()


def test_an_index_under_a_relative_cache_dir_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The default cache folder is relative: a restart from the same folder reads its index."""
    index = DiskIndex(tmp_path / INDEX_FILE)
    index.put_many([row("b.joblib")])
    index.note_runtimes("b.joblib", ("sklearn",))
    index.close()
    monkeypatch.chdir(tmp_path.parent)  # `serve --cache-dir cache`, restarted
    assert cached_runtimes(Path(tmp_path.name) / INDEX_FILE) == ("sklearn",)
