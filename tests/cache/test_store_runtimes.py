"""The runtimes a fresh cache's first start guesses from a local store's file names: only when
every model there says its runtime by its suffix, else no guess (the default list stands)."""

from __future__ import annotations

from pathlib import Path

from modelhost.cache.store_runtimes import store_runtimes


def files(folder: Path, *names: str) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_bytes(b"")
    return str(folder)


def test_a_store_of_archives_needs_torchserve(tmp_path: Path) -> None:
    store = files(tmp_path / "store", "rows.mar", "rows-1.mar", ".hidden")
    assert store_runtimes(store) == ("torch", "torchserve")
    assert store_runtimes(f"file://{store}") == ("torch", "torchserve")


def test_each_suffix_names_its_runtime(tmp_path: Path) -> None:
    store = files(tmp_path / "store", "a.joblib", "b.onnx", "c.ubj", "d.lgb", "e.pt")
    assert store_runtimes(store) == ("sklearn", "xgboost", "lightgbm", "onnxruntime", "torch")


def test_a_model_its_name_does_not_tell_leaves_no_guess(tmp_path: Path) -> None:
    """A folder, an archive or a shared suffix (.json, .txt) is read only when it loads."""
    for other in ("model.tar.gz", "booster.json", "notes.txt"):
        assert store_runtimes(files(tmp_path / other, "a.mar", other)) is None
    (tmp_path / "folder" / "sub").mkdir(parents=True)
    assert store_runtimes(files(tmp_path / "folder", "a.mar")) is None


def test_no_local_store_or_an_empty_one_leaves_no_guess(tmp_path: Path) -> None:
    assert store_runtimes("s3://bucket/models") is None
    assert store_runtimes(str(tmp_path / "missing")) is None
    assert store_runtimes(files(tmp_path / "empty")) is None


def test_a_large_store_is_not_read_to_the_end(tmp_path: Path) -> None:
    names = [f"m{index:04}.mar" for index in range(50)]
    assert store_runtimes(files(tmp_path / "store", *names), most_entries=10) is None
