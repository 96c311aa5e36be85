"""What a sandboxed worker may read of the models: its view, a folder where the frontend links
the artifacts of the models it loads there, and nothing else of the store or the cache.

Hard links cost no copy; an artifact on another file system is copied. Links inside an artifact
stay links: the sandbox judges them by where they lead.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

FOLDER = "views"  # under --cache-dir, so that a view links the cache's files
VARIABLE = "MODELHOST_SANDBOX_VIEWS"  # the views' folder, for the template


class Views:
    """The views of one server's sandboxed workers, one folder per worker process."""

    def __init__(self, cache_dir: Path) -> None:
        self.root = (cache_dir / FOLDER / str(os.getpid())).resolve()

    def environment(self) -> dict[str, str]:
        """Tells the template where its workers' views are; a server's earlier ones removed."""
        remove_stale(self.root.parent)
        self.root.mkdir(parents=True, exist_ok=True)
        return {VARIABLE: str(self.root)}

    def show(
        self, pid: int, folder_name: str, path: str, root: str | None
    ) -> tuple[str, str | None]:
        """Link the artifact at `path` into worker `pid`'s view, in the model's `folder_name`
        (the cache's, which the caller knows); its path and root there."""
        artifact = Path(path)
        folder = view_of(self.root, pid) / folder_name
        shutil.rmtree(folder, ignore_errors=True)  # a load of the same name that failed
        folder.mkdir(parents=True)
        shown = folder / artifact.name
        if artifact.is_dir() and not artifact.is_symlink():
            shutil.copytree(artifact, shown, symlinks=True, copy_function=link_or_copy)
        else:
            link_or_copy(str(artifact), str(shown))
        if root is None:
            return str(shown), None
        return str(shown), str(shown / Path(root).relative_to(artifact))

    def hide(self, pid: int, folder_name: str) -> None:
        """The model left worker `pid`: its artifact leaves the view."""
        shutil.rmtree(view_of(self.root, pid) / folder_name, ignore_errors=True)

    def drop(self, pid: int) -> None:
        """Worker `pid` is gone: its view goes."""
        shutil.rmtree(view_of(self.root, pid), ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def view_of(root: Path, pid: int) -> Path:
    return root / str(pid)


def link_or_copy(source: str, target: str) -> str:
    """A hard link, or a copy where none can be made (another file system, a file not ours)."""
    if os.path.islink(source):
        os.symlink(os.readlink(source), target)
        return target
    try:
        os.link(source, target, follow_symlinks=False)
    except OSError:
        shutil.copy2(source, target, follow_symlinks=False)
    return target


def remove_stale(folder: Path) -> None:
    """The views of servers that no longer run (a crash leaves them), by their process id."""
    with contextlib.suppress(FileNotFoundError), os.scandir(folder) as found:
        for entry in found:
            if entry.name.isdigit() and not running(int(entry.name)):
                shutil.rmtree(entry.path, ignore_errors=True)


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_own_view(root: str) -> Path:
    """In a new sandboxed worker, before it confines itself: the folder it will read models in."""
    view = view_of(Path(root), os.getpid())
    view.mkdir(mode=0o755, exist_ok=True)
    return view
