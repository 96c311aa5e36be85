"""A killed server's run folder is deleted by the next server to start; a running one's stays."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from modelhost.run_dirs import remove_orphans, run_dir


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_folders_of_servers_no_longer_running_are_deleted(tmp_path: Path) -> None:
    killed = tmp_path / f"modelhost-{dead_pid()}-abc"
    running = tmp_path / f"modelhost-{os.getpid()}-def"
    other = tmp_path / "modelhost-notapid"
    for folder in (killed, running, other):
        (folder / "sub").mkdir(parents=True)
        (folder / "workers.sock").write_bytes(b"")
    assert remove_orphans(tmp_path) == [killed]
    assert running.exists() and other.exists() and not killed.exists()


def test_run_folder_goes_with_its_server(tmp_path: Path) -> None:
    """A run folder names its server and goes when it stops."""
    with run_dir(str(tmp_path)) as folder:
        assert folder.name.startswith(f"modelhost-{os.getpid()}-")
        assert folder.is_dir()
    assert not folder.exists()
