"""Fast copies: pickled models saved again as plain pickles, which the C unpickler reads.

Why and how: docs/decisions.md, "Fast copies: scikit-learn models are reloaded from a plain pickle".
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
# a copy without a memo is larger than its artifact ("Fast copies are pickled without a memo")
SLACK_BYTES = 4096


def room_for(artifact_bytes: int) -> int:
    return artifact_bytes + artifact_bytes // 16 + SLACK_BYTES


@dataclass(frozen=True)
class FastCopy:
    path: Path
    bytes: int


@dataclass(frozen=True, eq=False)
class Offer:
    """The copy to read at `path`, or room to write one there."""

    name: str
    path: Path
    room: int  # bytes the worker may write; 0: read the copy that is there

    @property
    def reads(self) -> bool:
        return self.room == 0


def identity(source: str, etag: str | None, path: Path) -> str:
    """A digest that changes with the ETag, the file's size and change time, or its inode."""
    status = path.stat()
    facts = (source, etag or "", str(path), status.st_ino, status.st_size, status.st_ctime_ns)
    return hashlib.sha256("\0".join(map(str, facts)).encode()).hexdigest()[:32]


class FastCopies:
    """The copies this server wrote, and the room promised to those being written."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.copies: OrderedDict[str, FastCopy] = OrderedDict()  # least recently read first
        self._writing: dict[str, Offer] = {}
        self.written_bytes = 0  # a running total, so the disk budget never sums the copies
        self._promised_bytes = 0
        self._loaded_before = Doorkeeper()

    def set_aside(self, aside: Path) -> bool:
        """Move earlier copies to `aside`: other library versions may have written them."""
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
        return self.written_bytes + self._promised_bytes

    def oldest(self) -> str | None:
        return next(iter(self.copies), None)

    def offer(self, name: str, key: str, artifact_bytes: int, free_bytes: int) -> Offer | None:
        """A copy to read, or room to write one at a name's second load."""
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
        """Record the copy written, or forget one that could not be read."""
        if not offer.reads:
            if self._writing.get(offer.name) is offer:
                del self._writing[offer.name]
                self._promised_bytes -= offer.room
            if written:
                self._forget(offer.name)  # a copy of the same path, written over
                self.copies[offer.name] = FastCopy(offer.path, written)
                self.written_bytes += written
            else:  # the worker may have died mid-write
                for torn in self.folder.glob(f".{offer.path.name}.*"):
                    torn.unlink(missing_ok=True)
        elif not read:  # the worker deleted it as unreadable
            self.drop(offer.name)

    def drop(self, name: str) -> int:
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
