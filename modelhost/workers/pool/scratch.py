"""Sandboxed workers' scratch folders, kept under a size (decisions.md, "A sandboxed worker's
scratch folder is bounded")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from pathlib import Path

from modelhost.workers.handle import ScratchUse, WorkerHandle
from modelhost.workers.pool.table import WorkerTable
from modelhost.workers.sandbox import scratch_path

logger = logging.getLogger("modelhost.workers")

MAX_ENTRIES = 10_000  # files and folders: what one reading walks at most
INTERVAL_S = 1.0


def scratch_use(folder: Path, most_entries: int = MAX_ENTRIES) -> ScratchUse:
    """Disk allocated under `folder`, and its entries, counted until past `most_entries`."""
    used = entries = 0
    folders = [folder]
    while folders and entries <= most_entries:
        with contextlib.suppress(OSError), os.scandir(folders.pop()) as found:
            for entry in found:
                entries += 1
                if entries > most_entries:
                    break
                with contextlib.suppress(OSError):  # gone meanwhile
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(Path(entry.path))
                    else:
                        used += entry.stat(follow_symlinks=False).st_blocks * 512
    return ScratchUse(used, entries)


class ScratchWatch:
    """Kills each sandboxed worker whose folder is past the limits."""

    def __init__(
        self,
        run_dir: Path,
        max_bytes: int,
        table: WorkerTable,
        kill: Callable[[WorkerHandle], None],
    ) -> None:
        self.run_dir, self.max_bytes, self.table, self.kill = run_dir, max_bytes, table, kill

    async def run(self) -> None:
        while True:
            await asyncio.sleep(INTERVAL_S)
            try:
                await self.check()
            except Exception:  # noqa: BLE001  (logged; the watch goes on)
                logger.exception("the scratch watch failed; it goes on")

    async def check(self) -> None:
        for worker in [worker for worker in self.table.workers.values() if worker.untrusted]:
            folder = scratch_path(self.run_dir, worker.pid)
            use = await asyncio.to_thread(scratch_use, folder)
            if worker.alive and (use.bytes > self.max_bytes or use.entries > MAX_ENTRIES):
                worker.scratch = use
                self.kill(worker)
