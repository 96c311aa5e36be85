"""A file the server rereads while it runs, replaced as an editor does, and the event it answers."""

from __future__ import annotations

import os
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

from modelhost import testing


def write(path: Path, text: str) -> None:
    """Replace the file in one step, so its stamp changes whatever the clock's grain."""
    staged = path.with_suffix(".new")
    staged.write_text(text)
    os.replace(staged, path)


def reloaded(
    server: testing.RunningServer, path: Path, text: str, kinds: Collection[str]
) -> dict[str, Any]:
    """Replace `path`; the first new event of `kinds`, which says how the server took it (it
    looks each second)."""
    before = len(events_of(server, kinds))
    write(path, text)
    for _ in range(300):
        if len(found := events_of(server, kinds)) > before:
            return found[-1]
        time.sleep(0.1)
    raise AssertionError(f"no reload event in 30 s: {server.log_text()[-2000:]}")


def events_of(server: testing.RunningServer, kinds: Collection[str]) -> list[dict[str, Any]]:
    return [event for event in server.events() if event["kind"] in kinds]
