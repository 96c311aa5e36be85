"""Reconciling the disk index with the entry folders, in the background while serving.

Until every folder is counted, the last run's budget less the known entries counts as held, so
the budget holds.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

from modelhost.cache.disk_index import DiskIndex, Row
from modelhost.cache.entries import TEMP_PREFIX, entry_folder_name, read_entries, remove_tree
from modelhost.records.events import EventLog

BATCH = 256  # folders or rows per trip to the thread
BUDGET_FACT = "budget_bytes"  # as the last run left it


class Reconciliation:
    def __init__(
        self,
        index: DiskIndex,
        *,
        entries_dir: Path,
        own_prefix: str,
        set_aside: Callable[[Path], Path | None],
        publishing: set[str],
        unreconciled_bytes: int,
        budget_bytes: int,
        events: EventLog,
        counting: bool = True,
    ) -> None:
        self.index, self.entries_dir, self.own_prefix = index, entries_dir, own_prefix
        self.set_aside = set_aside
        self.publishing = publishing  # folders renamed into place whose rows are not yet put
        self.unreconciled_bytes = unreconciled_bytes
        self.counting = counting
        self.budget_bytes, self.events = budget_bytes, events
        self.done = False
        self._task: asyncio.Task[None] | None = None
        self._counted: asyncio.Future[None] | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> asyncio.Task[None]:
        self._counted = loop.create_future()
        self._counted.add_done_callback(lambda f: f.cancelled() or f.exception())  # no warning
        self._task = task = loop.create_task(self._run_recorded())
        return task

    def stop(self) -> None:
        """End the background run before its index closes; it is safe to run again."""
        if self._task is not None:
            self._task.cancel()

    async def finished(self) -> None:
        """Wait until done, starting it on this loop if needed."""
        if not self.done:
            await asyncio.shield(self._running())

    async def counted(self) -> None:
        """Wait until every folder is counted, after which entries may be built."""
        if self.counting:
            self._running()
            assert self._counted is not None
            await asyncio.shield(self._counted)

    def _running(self) -> asyncio.Task[None]:
        loop, task = asyncio.get_running_loop(), self._task
        if task is None or task.get_loop() is not loop or task.done():
            task = self.start(loop)
        return task

    def lost(self, row_bytes: int) -> None:
        """A row's folder is gone: its bytes stay held until every folder is counted."""
        if self.counting:
            self.unreconciled_bytes += row_bytes

    async def _run_recorded(self) -> None:
        counted = self._counted
        try:
            await self.run()
        except BaseException as error:
            if counted and not counted.done():
                counted.set_exception(error)
            if isinstance(error, Exception):
                self.events.emit("failure", reason="reconcile", detail={"error": repr(error)})
            raise
        self.index.set_fact(BUDGET_FACT, self.budget_bytes)

    async def run(self) -> None:
        """Safe to run again if interrupted."""
        with os.scandir(self.entries_dir) as listing:
            while batch := await listed(listing):
                await self._folders(batch)
        self.unreconciled_bytes, self.counting = 0, False
        if self._counted and not self._counted.done():
            self._counted.set_result(None)
        after = ""
        while page := self.index.entries_after(after, BATCH):
            await self._rows(page)
            after = page[-1][0]
        self.done = True

    async def _folders(self, names: list[str]) -> None:
        own = self.own_prefix
        temps = [n for n in names if n.startswith(TEMP_PREFIX) and not n.startswith(own)]
        entries = [n for n in names if not n.startswith(TEMP_PREFIX)]
        known = self.index.known_folders(entries) | self.publishing
        unknown = [os.path.join(self.entries_dir, n) for n in entries if n not in known]
        found = await asyncio.to_thread(read_entries, unknown)
        doomed = [self.entries_dir / n for n in temps]
        doomed += [Path(folder) for folder, row in found if not await self._adopted(folder, row)]
        await asyncio.to_thread(remove_all, [p for p in map(self._aside, doomed) if p])

    async def found(self, name: str) -> Row | None:
        """Take back `name`'s folder at once, for a request that comes before the scan."""
        if self.done:
            return None
        folder = os.path.join(self.entries_dir, entry_folder_name(name))
        if not os.path.isdir(folder):  # text, not Path: a made-up name must not be interned
            return None
        [(_, row)] = await asyncio.to_thread(read_entries, [folder])
        if row is None or row.name != name or not await self._adopted(folder, row):
            return None
        return self.index.get(name)

    async def _adopted(self, folder: str, row: Row | None) -> bool:
        """Take back a whole folder; False if it is to be deleted."""
        entry = os.path.basename(folder)
        if entry in self.publishing or self.index.known_folders([entry]):
            return True  # put in place since listed
        if row is None or self.index.get(row.name) is not None:
            return False  # broken, or a second folder of a known model
        self.publishing.add(entry)  # a second look meanwhile keeps it, counted once
        try:
            await self.index.put(row)
        finally:
            self.publishing.discard(entry)
        self.unreconciled_bytes -= min(row.bytes, self.unreconciled_bytes)
        return True

    def _aside(self, path: Path) -> Path | None:
        return path if path.name.startswith(TEMP_PREFIX) else self.set_aside(path)

    async def _rows(self, page: list[tuple[str, str]]) -> None:
        # text, not Path: pathlib would intern every entry's name for good
        folders = [os.path.join(self.entries_dir, entry) for _, entry in page]
        gone = await asyncio.to_thread(missing, folders)
        for name, entry in page:
            row = self.index.get(name)
            if row is None or row.entry != entry or entry not in gone or entry in self.publishing:
                continue
            if not os.path.exists(os.path.join(self.entries_dir, entry)):  # not put back since
                self.index.remove(name)


async def listed(listing: Iterator[os.DirEntry[str]]) -> list[str]:
    """The next names, read by a thread; cancelled, it waits for the thread, which still reads."""
    reading = asyncio.ensure_future(asyncio.to_thread(next_names, listing))
    try:
        return await asyncio.shield(reading)
    except asyncio.CancelledError:
        await asyncio.wait([reading])
        raise


def next_names(listing: Iterator[os.DirEntry[str]]) -> list[str]:
    return [entry.name for entry in itertools.islice(listing, BATCH)]


def missing(folders: list[str]) -> set[str]:
    return {os.path.basename(folder) for folder in folders if not os.path.exists(folder)}


def remove_all(paths: list[Path]) -> None:
    for path in paths:
        remove_tree(path)
