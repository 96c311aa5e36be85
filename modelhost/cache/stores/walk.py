"""A store folder's models in name order, a page at a time from a cursor.

A plain folder sorts as its name and a `/`, so walking each folder's entries in that order
lists every name in order. A page bisects the folder's sorted names and looks into its own.
"""

from __future__ import annotations

import bisect
import heapq
import os

from modelhost.cache.stores.folder_names import DIR, FILE, FolderNames, Listing
from modelhost.names import FOLDER_MARKERS, HF_CONFIG, HF_WEIGHTS, is_model_file, is_model_folder

Entry = tuple[str, str, bool]  # order key, path, whether to walk into it
SHARED = FolderNames()


class FolderWalk:
    """The first `limit` models after `after`: files and folders of the kinds the loader takes;
    hidden entries are left out."""

    def __init__(self, after: str, limit: int, names: FolderNames = SHARED) -> None:
        self.after, self.limit, self.names = after, limit, names
        self.found: list[str] = []

    def folder(self, path: str, prefix: str) -> None:
        """Add the models below `path` (names starting with `prefix`), a batch at a time."""
        last = ""  # the order key of the last entry walked
        while (wanted := self.limit - len(self.found)) > 0:
            batch = self.nearest(path, prefix, last, wanted)
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

    def nearest(self, folder: str, prefix: str, last: str, limit: int) -> list[Entry]:
        """The `limit` first entries of `folder` past `last` and `after`."""
        low = _low(prefix, self.after, last)
        try:
            listing = self.names.listing(folder) if low is not None else None
        except (FileNotFoundError, NotADirectoryError):
            listing = None
        if listing is None or low is None:
            return []
        found: list[Entry] = []
        bound = None  # the limit-th order key found
        for i in _candidates(listing, low):
            if bound is not None and prefix + listing.names[i] > bound:
                break  # an entry sorts at its name or just after
            entry = _entry(folder, prefix, self.after, listing, i)
            if entry is not None and entry[0] > last:
                found.append(entry)
                if len(found) >= limit:
                    bound = heapq.nsmallest(limit, found)[-1][0]
        return heapq.nsmallest(limit, found)


def _low(prefix: str, after: str, last: str) -> str | None:
    """The least name an entry past `last` and `after` has, or a prefix of it; None: none."""
    if after.startswith(prefix):
        relative = after[len(prefix) :]
    elif after < prefix:
        relative = ""
    else:
        return None
    return max(relative, last[len(prefix) :])


def _candidates(listing: Listing, low: str) -> list[int] | range:
    """Indexes from `low` on, after those of prefixes of `low` (folder `a` sorts after `a-b`)."""
    names = listing.names
    start = bisect.bisect_left(names, low)
    prefixes = [low[:i] for i, char in enumerate(low) if char <= "/"]
    at = [bisect.bisect_left(names, name) for name in prefixes]
    found = [i for i, name in zip(at, prefixes, strict=True) if i < len(names) and names[i] == name]
    return [*found, *range(start, len(names))] if found else range(start, len(names))


def _entry(folder: str, prefix: str, after: str, listing: Listing, i: int) -> Entry | None:
    """The entry as (order key, path, walk into it), if it may hold a model after `after`."""
    name, kind = listing.names[i], listing.kinds[i]
    key, path = prefix + name, os.path.join(folder, name)
    if kind == DIR:
        if key + "/" <= after and not after.startswith(key + "/"):
            return None  # every name below sorts before `after`
        if is_model_dir(path):
            return (key, path, False) if key > after else None
        return key + "/", path, True
    if kind == FILE and key > after and is_model_file(name):
        return key, path, False
    return None


def is_model_dir(folder: str) -> bool:
    """Whether the folder is one model, by the markers it holds."""
    names = [name for name in (*FOLDER_MARKERS, HF_CONFIG) if os.path.isfile(f"{folder}/{name}")]
    if names == [HF_CONFIG]:
        with os.scandir(folder) as scan:
            names += [e.name for e in scan if e.name.endswith(HF_WEIGHTS) and e.is_file()]
    return is_model_folder(names)
