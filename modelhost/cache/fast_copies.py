"""Fast copies: a pickle-based model saved again by a worker that loaded it, as a plain pickle
(protocol 5) that Python's C unpickler reads; joblib reads its files with the pure-Python
unpickler. An 8 MB digits forest loads in 2.1 ms from its fast copy against 20-23 ms from its
.joblib (benchmarks/load_formats.py), and under churn most requests are loads.

A copy is written at a model's second load, not its first (cache/doorkeeper.py): a model loaded
once, as in a scan over many names, would never read it, and the writes would cost the loads
beside them disk bandwidth. A copy is named by its artifact's identity (source, ETag, file and
inode, size, change time), so a new version of the artifact never meets an old copy. Copies live
as long as the server runs: the folder is set aside at start and deleted in the background, since
the libraries that wrote them may have changed. They count against the disk budget, are written
only into room that is free (never by deleting anything), and are the first bytes deleted when the
disk tier needs room, least recently read first: a slower load costs less than a download. Their
bytes are running totals, so the budget never sums them.
"""

from __future__ import annotations

import hashlib
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from modelhost.cache.doorkeeper import Doorkeeper

FOLDER = "fast-copies"
SUFFIX = ".pickle"
# room for a copy beyond its artifact's bytes: a copy pickled without a memo repeats what a memo
# would have referred back to (each tree's dtypes and class names), and came out 2.2% larger than
# the digits forests' .joblib files (8.17 against 7.99 MB; the tests' forest the same);
# within 1/64 it did not fit, and every such forest got the memoized copy, which loads at 2x
SLACK_BYTES = 4096


def room_for(artifact_bytes: int) -> int:
    return artifact_bytes + artifact_bytes // 16 + SLACK_BYTES


@dataclass(frozen=True)
class FastCopy:
    """A model's fast copy on disk."""

    path: Path
    bytes: int


@dataclass(frozen=True, eq=False)
class Offer:
    """What one load is told: the copy to read at `path`, or room to write one there."""

    name: str
    path: Path
    room: int  # bytes the worker may write; 0: read the copy that is there

    @property
    def reads(self) -> bool:
        return self.room == 0


def identity(source: str, etag: str | None, path: Path) -> str:
    """A digest that changes whenever the artifact at `path` may have: a new ETag, a file
    rewritten in place (size, change time), or an entry rebuilt (a new inode)."""
    status = path.stat()
    facts = (source, etag or "", str(path), status.st_ino, status.st_size, status.st_ctime_ns)
    return hashlib.sha256("\0".join(map(str, facts)).encode()).hexdigest()[:32]


class FastCopies:
    """The fast copies this server has written, and the room promised to those being written."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.copies: OrderedDict[str, FastCopy] = OrderedDict()  # least recently read first
        self._writing: dict[str, Offer] = {}
        self.written_bytes = 0  # on disk: what deleting every copy would free
        self._promised_bytes = 0
        self._loaded_before = Doorkeeper()

    def set_aside(self, aside: Path) -> bool:
        """Start empty: copies of an earlier run may come from other library versions. They are
        renamed to `aside` for the caller to delete in the background; True if there were any."""
        try:
            with os.scandir(self.folder) as listing:
                left = next(listing, None) is not None
        except FileNotFoundError:
            left = False
        if left:
            self.folder.rename(aside)
        self.folder.mkdir(parents=True, exist_ok=True)
        return left

    @property
    def bytes(self) -> int:
        """On disk, and promised to copies being written."""
        return self.written_bytes + self._promised_bytes

    def oldest(self) -> str | None:
        """The model whose copy was read least recently."""
        return next(iter(self.copies), None)

    def offer(self, name: str, key: str, artifact_bytes: int, free_bytes: int) -> Offer | None:
        """The copy of this version to read; else room to write one if `name` was loaded before,
        `free_bytes` has the room and no other load of `name` is writing one; else None."""
        path = self.folder / f"{key}{SUFFIX}"
        known = self.copies.get(name)
        if known is not None and known.path == path:
            self.copies.move_to_end(name)
            return Offer(name, path, 0)
        if known is not None:
            self.drop(name)  # an earlier version's
        elif not self._loaded_before.seen(name):
            return None
        room = room_for(artifact_bytes)
        if name in self._writing or room > free_bytes:
            return None
        self._writing[name] = offer = Offer(name, path, room)
        self._promised_bytes += room
        return offer

    def settle(self, offer: Offer, written: int, read: bool) -> None:
        """After the load: record the copy written, or forget one that could not be read."""
        if not offer.reads:
            if self._writing.get(offer.name) is offer:
                del self._writing[offer.name]
                self._promised_bytes -= offer.room
            if written:
                self._forget(offer.name)  # a copy of the same path, written over
                self.copies[offer.name] = FastCopy(offer.path, written)
                self.written_bytes += written
            else:  # the worker may have died writing it aside
                for torn in self.folder.glob(f".{offer.path.name}.*"):
                    torn.unlink(missing_ok=True)
        elif not read:  # gone, or unreadable (the worker deleted it)
            self.drop(offer.name)

    def drop(self, name: str) -> int:
        """Delete `name`'s copy; the bytes it held."""
        copy = self._forget(name)
        if copy is None:
            return 0
        copy.path.unlink(missing_ok=True)
        return copy.bytes

    def _forget(self, name: str) -> FastCopy | None:
        copy = self.copies.pop(name, None)
        if copy is not None:
            self.written_bytes -= copy.bytes
        return copy
