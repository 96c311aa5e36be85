"""A folder's visible entries in name order, kept while the folder's mtime stands.

Adding, removing or renaming an entry changes a folder's mtime, so a kept list is never stale.
A folder changed in the last second is not kept: a change in the same clock tick keeps the mtime.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

KEPT_FOLDERS = 4
MOST_KEPT_NAMES = 1_000_000  # in all (docs/performance.md)
LEAST_KEPT_NAMES = 1000
SETTLED_NS = 1_000_000_000
DIR, FILE, OTHER = 1, 2, 0


@dataclass(frozen=True)
class Listing:
    names: list[str]  # sorted, less dotfiles
    kinds: bytes  # one per name


class FolderNames:
    """The listings of a few large folders, least recently used first out."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, tuple[int, Listing]] = OrderedDict()
        self._lock = threading.Lock()

    def listing(self, folder: str) -> Listing:
        """The folder's listing; OSError where it cannot be read."""
        mtime = os.stat(folder).st_mtime_ns
        with self._lock:
            kept = self._kept.get(folder)
            if kept is not None and kept[0] == mtime:
                self._kept.move_to_end(folder)
                return kept[1]
        started = time.time_ns()
        listing = read(folder)
        if len(listing.names) >= LEAST_KEPT_NAMES and started - mtime > SETTLED_NS:
            self._keep(folder, mtime, listing)
        return listing

    def _keep(self, folder: str, mtime: int, listing: Listing) -> None:
        with self._lock:
            self._kept[folder] = (mtime, listing)
            self._kept.move_to_end(folder)
            while len(self._kept) > KEPT_FOLDERS or self._names() > MOST_KEPT_NAMES:
                self._kept.popitem(last=False)

    def _names(self) -> int:
        return sum(len(listing.names) for _, listing in self._kept.values())


def read(folder: str) -> Listing:
    with os.scandir(folder) as scan:
        entries = sorted((e.name, _kind(e)) for e in scan if not e.name.startswith("."))
    return Listing([name for name, _ in entries], bytes(kind for _, kind in entries))


def _kind(entry: os.DirEntry[str]) -> int:
    try:
        if entry.is_dir(follow_symlinks=False):
            return DIR
        return FILE if entry.is_file() else OTHER
    except OSError:
        return OTHER
