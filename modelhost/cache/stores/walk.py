"""A store folder's models in name order, a page at a time from a cursor.

A plain folder sorts as its name and a `/`, so walking each folder's entries in that order
lists every name in order, and a folder wholly before the cursor is never opened.
"""

from __future__ import annotations

import heapq
import os

from modelhost.names import FOLDER_MARKERS, HF_CONFIG, HF_WEIGHTS, is_model_file, is_model_folder

Entry = tuple[str, str, bool]  # order key, path, whether to walk into it


class FolderWalk:
    """The first `limit` models after `after`: files and folders of the kinds the loader takes;
    hidden entries are left out."""

    def __init__(self, after: str, limit: int) -> None:
        self.after, self.limit = after, limit
        self.found: list[str] = []

    def folder(self, path: str, prefix: str) -> None:
        """Add the models below `path` (names starting with `prefix`), a batch at a time."""
        last = ""  # the order key of the last entry walked
        while (wanted := self.limit - len(self.found)) > 0:
            batch = nearest_entries(path, prefix, self.after, last, wanted)
            for key, entry_path, is_tree in batch:
                if is_tree:
                    self.folder(entry_path, key)
                else:
                    self.found.append(key)
                if len(self.found) >= self.limit:
                    return
            if len(batch) < wanted:
                return
            last = batch[-1][0]


def nearest_entries(folder: str, prefix: str, after: str, last: str, limit: int) -> list[Entry]:
    """The `limit` first entries of `folder` past `last` that may hold a model after `after`."""
    try:
        with os.scandir(folder) as scan:
            entries = (_entry(e, prefix, after) for e in scan if not e.name.startswith("."))
            return heapq.nsmallest(limit, (e for e in entries if e is not None and e[0] > last))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _entry(entry: os.DirEntry[str], prefix: str, after: str) -> Entry | None:
    """The entry as (order key, path, walk into it), if it may hold a model after `after`."""
    key = prefix + entry.name
    if entry.is_dir(follow_symlinks=False):
        if key + "/" <= after and not after.startswith(key + "/"):
            return None  # every name below sorts before `after`
        if is_model_dir(entry.path):
            return (key, entry.path, False) if key > after else None
        return key + "/", entry.path, True
    if key > after and is_model_file(entry.name) and entry.is_file():
        return key, entry.path, False
    return None


def is_model_dir(folder: str) -> bool:
    """Whether the folder is one model, by the markers it holds."""
    names = [name for name in (*FOLDER_MARKERS, HF_CONFIG) if os.path.isfile(f"{folder}/{name}")]
    if names == [HF_CONFIG]:
        with os.scandir(folder) as scan:
            names += [e.name for e in scan if e.name.endswith(HF_WEIGHTS) and e.is_file()]
    return is_model_folder(names)
