"""A folder store's listing: real models of every kind, and changes seen on the next page."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.cache.stores import walk
from modelhost.cache.stores.local import LocalStore
from modelhost.testing.hf_models import hf_classifier


def listed(store: LocalStore, after: str = "", limit: int = 1000) -> list[str]:
    return asyncio.run(store.list_keys(after, limit))


def test_real_models_of_every_kind_are_listed(tmp_path: Path) -> None:
    """What testing's builders write, as users ship them, unused: each is one model."""
    testing.onnx_iris(tmp_path / "vision/iris.onnx")
    testing.torch_iris(tmp_path / "torch/iris.pt")
    testing.torch_iris(tmp_path / "torch/iris.pt2")
    hf_classifier(tmp_path / "text/bert")
    testing.tensorflow_iris(tmp_path / "tf/iris")
    testing.sagemaker_folder(tmp_path / "sm")
    assert listed(LocalStore(tmp_path)) == [
        "sm",
        "text/bert",
        "tf/iris",
        "torch/iris.pt",
        "torch/iris.pt2",
        "vision/iris.onnx",
    ]


def settled(folder: Path) -> None:
    """Date the folder's last change a minute back, so its names are kept between pages."""
    os.utime(folder, ns=(time.time_ns(), time.time_ns() - 60 * 10**9))


def big_store(root: Path, count: int = 1500) -> list[str]:
    """A flat folder of `count` models, every third a folder with handler.py; their keys."""
    keys = []
    for i in range(count):
        if i % 3:
            (root / f"m{i:05d}.joblib").write_bytes(b"m")
            keys.append(f"m{i:05d}.joblib")
        else:
            (root / f"m{i:05d}").mkdir()
            (root / f"m{i:05d}/handler.py").write_text("")
            keys.append(f"m{i:05d}")
    settled(root)
    return keys


def all_pages(store: LocalStore, limit: int) -> list[str]:
    keys, after = [], ""
    while page := listed(store, after, limit):
        keys += page
        after = page[-1]
    return keys


def test_models_added_and_removed_show_on_the_next_page(tmp_path: Path) -> None:
    """The folder's kept names are dropped when its mtime moves; a folder that gains a handler
    is one model on the next page, with no change to its parent."""
    keys = big_store(tmp_path)
    store = LocalStore(tmp_path)
    assert listed(store, "", 1000) == keys[:1000]
    (tmp_path / "m00004.joblib").unlink()
    (tmp_path / "m00004-new.onnx").write_bytes(b"m")
    (tmp_path / ".m00004-hidden.onnx").write_bytes(b"m")
    (tmp_path / "m00005-tf").mkdir()
    (tmp_path / "m00005-tf/saved_model.pb").write_bytes(b"m")
    (tmp_path / "m00006/handler.py").unlink()
    (tmp_path / "m00006/w.joblib").write_bytes(b"m")
    settled(tmp_path)
    assert listed(store, "m00003", 5) == [
        "m00004-new.onnx",
        "m00005-tf",
        "m00005.joblib",
        "m00006/w.joblib",
        "m00007.joblib",
    ]
    (tmp_path / "m00006/handler.py").write_text("")
    assert listed(store, "m00005.joblib", 2) == ["m00006", "m00007.joblib"]


def test_pages_of_a_kept_folder_keep_name_order_without_repeats(tmp_path: Path) -> None:
    """A folder without a model of its own sorts after its name's other entries (`a/` after
    `a-b` and `a.pkl`); a model folder sorts at its name."""
    keys = big_store(tmp_path)
    for name in ("a", "a-b", "a.b", "m00003-x", "m00003.x"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "w.joblib").write_bytes(b"m")
        (tmp_path / f"{name}-1.pkl").write_bytes(b"m")
        (tmp_path / f"{name}.pkl").write_bytes(b"m")
        keys += [f"{name}/w.joblib", f"{name}-1.pkl", f"{name}.pkl"]
    (tmp_path / "m00003-x/handler.py").write_text("")
    keys = [key for key in keys if not key.startswith("m00003-x/")] + ["m00003-x"]
    settled(tmp_path)
    store = LocalStore(tmp_path)
    for limit in (1, 7, 1000, 5000):
        assert all_pages(store, limit) == sorted(keys), limit


def test_a_page_looks_into_only_its_own_folders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whether a folder is a model is asked of the page's candidates, not of every later one."""
    big_store(tmp_path, 3000)
    store = LocalStore(tmp_path)
    listed(store, "", 10)  # reads and keeps the folder's names
    asked: list[str] = []
    real = walk.is_model_dir
    monkeypatch.setattr(walk, "is_model_dir", lambda path: asked.append(path) or real(path))
    assert len(listed(store, "m01500", 30)) == 30
    assert 0 < len(asked) <= 30
