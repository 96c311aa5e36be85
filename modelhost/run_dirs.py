"""The folder that holds a server's worker sockets.

A SIGKILL leaves no chance to delete it, so the folder names its process and a starting
server deletes those of dead ones.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

PREFIX = "modelhost-"


@contextlib.contextmanager
def run_dir(parent: str | None = None) -> Iterator[Path]:
    """A new folder for this server, deleted when it stops."""
    root = Path(parent or tempfile.gettempdir())
    remove_orphans(root)
    with tempfile.TemporaryDirectory(prefix=f"{PREFIX}{os.getpid()}-", dir=root) as folder:
        yield Path(folder)


def remove_orphans(root: Path) -> list[Path]:
    """Delete the run folders of this user's servers that no longer run."""
    removed = []
    for folder in root.glob(f"{PREFIX}*-*"):
        pid = folder.name[len(PREFIX) :].partition("-")[0]
        with contextlib.suppress(OSError):
            if pid.isdigit() and folder.stat().st_uid == os.getuid() and not _runs(int(pid)):
                shutil.rmtree(folder)
                removed.append(folder)
    return removed


def _runs(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        return True
    return True
