"""A sandboxed worker's view: the artifacts of its models linked in, never what they lead to."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from modelhost.workers.views import Views, link_or_copy, remove_stale

PID = 4242


@pytest.fixture
def views(tmp_path: Path) -> Views:
    found = Views(tmp_path / "cache")
    found.environment()
    return found


def test_a_file_is_linked_not_copied(views: Views, tmp_path: Path) -> None:
    artifact = tmp_path / "cache/models/t%2Fm/model.onnx"
    artifact.parent.mkdir(parents=True)
    artifact.write_bytes(b"onnx")
    path, root = views.show(PID, "t%2Fm", str(artifact), None)
    assert Path(path).read_bytes() == b"onnx" and root is None
    assert os.path.samefile(path, artifact)  # a hard link: no bytes copied
    assert Path(path).is_relative_to(views.root / str(PID))


def test_a_folder_keeps_its_root_and_its_links_as_links(views: Views, tmp_path: Path) -> None:
    """A link inside an artifact stays a link: the sandbox judges it by where it leads."""
    folder = tmp_path / "store/t/handler"
    (folder / "inner").mkdir(parents=True)
    (folder / "inner/modelhost.toml").write_text('handler = "x.py"\n')
    (folder / "elsewhere").symlink_to(tmp_path / "store/u")
    path, root = views.show(PID, "t%2Fhandler", str(folder), str(folder / "inner"))
    assert root == str(Path(path) / "inner")
    assert (Path(root) / "modelhost.toml").read_text() == 'handler = "x.py"\n'
    assert os.readlink(Path(path) / "elsewhere") == str(tmp_path / "store/u")


def test_a_model_leaving_leaves_the_view(views: Views, tmp_path: Path) -> None:
    artifact = tmp_path / "m.txt"
    artifact.write_text("trees")
    path, _ = views.show(PID, "m", str(artifact), None)
    views.hide(PID, "m")
    assert not Path(path).exists() and artifact.exists()
    views.show(PID, "m", str(artifact), None)
    views.drop(PID)
    assert not (views.root / str(PID)).exists()


def test_a_file_that_cannot_be_linked_is_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On another file system than the cache's (a store read in place), a link fails."""

    def cross_device(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    source, target = tmp_path / "a", tmp_path / "b"
    source.write_text("x")
    monkeypatch.setattr(os, "link", cross_device)
    link_or_copy(str(source), str(target))
    assert target.read_text() == "x" and not os.path.samefile(source, target)


def test_views_of_servers_gone_are_removed(tmp_path: Path) -> None:
    gone, alive = tmp_path / "999999999", tmp_path / str(os.getpid())
    gone.mkdir()
    alive.mkdir()
    remove_stale(tmp_path)
    assert not gone.exists() and alive.exists()
