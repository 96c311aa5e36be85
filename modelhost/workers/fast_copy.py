"""A worker's side of fast copies (`modelhost.cache.fast_copies`): a scikit-learn model read from
its plain pickle instead of its artifact, or that pickle written after the artifact's load."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from modelhost.workers.handlers.base import Handler
from modelhost.workers.handlers.oip import SpeaksOip
from modelhost.workers.handlers.sklearn import SklearnHandler
from modelhost.workers.messages import Load

UNSHARED_SLACK_BYTES = 1 << 20  # a copy without a memo may pass the footprint by 1/4 and this


class TooLarge(Exception):
    """The copy outgrew the room the frontend gave it."""


class BoundedFile:
    """A file that refuses to be written past `room` bytes."""

    def __init__(self, file: Any, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data: Any) -> int:
        self.room -= memoryview(data).nbytes
        if self.room < 0:
            raise TooLarge
        written: int = self.file.write(data)
        return written


def read(request: Load) -> Handler | None:
    """The model from the fast copy the request names, answering OIP too as `load_handler`'s
    do; or None: there is none, or it cannot be read (a broken one is deleted), and the artifact
    is loaded instead."""
    if not request.fast_copy or request.fast_copy_room:
        return None
    path = Path(request.fast_copy)
    try:
        with path.open("rb") as file:
            return SpeaksOip(SklearnHandler(pickle.load(file)))
    except FileNotFoundError:
        return None
    except Exception:  # noqa: BLE001  (torn, or written by other library versions)
        path.unlink(missing_ok=True)
        return None


def write(handler: Handler, request: Load, footprint: int) -> int:
    """Write the fast copy the request has room for, if `handler` is one of scikit-learn's just
    loaded from its artifact (`footprint` bytes in memory); the bytes written (0: none). Written
    aside, renamed when whole.

    Pickled without a memo where that stays near the footprint: the unpickler's memo holds every
    object until the load ends, so a forest's trees keep the arrays they were rebuilt from and a
    memoized copy loads at twice the model's size. A model whose parts are shared (a voting
    ensemble's estimators, listed twice) or cyclic cannot be pickled so within bounds, and gets
    the memoized copy."""
    inner = handler.inner if isinstance(handler, SpeaksOip) else handler
    if not request.fast_copy_room or type(inner) is not SklearnHandler:
        return 0
    path = Path(request.fast_copy)
    aside = path.with_name(f".{path.name}.{os.getpid()}")  # the host deletes it if we die
    unshared = min(request.fast_copy_room, footprint + footprint // 4 + UNSHARED_SLACK_BYTES)
    return _written(inner.model, aside, path, unshared, memo=False) or _written(
        inner.model, aside, path, request.fast_copy_room, memo=True
    )


def _written(model: Any, aside: Path, path: Path, room: int, memo: bool) -> int:
    """`model` pickled to `aside` within `room` bytes, then renamed to `path`: the bytes written,
    or 0 (and no file)."""
    try:
        with aside.open("wb") as file:
            pickler = pickle.Pickler(BoundedFile(file, room), protocol=5)
            pickler.fast = not memo  # fast: no memo (and a ValueError for a cycle)
            pickler.dump(model)
        written = aside.stat().st_size
        aside.rename(path)
    except Exception:  # noqa: BLE001  (no room, a full disk, a cycle, an object not picklable)
        aside.unlink(missing_ok=True)
        return 0
    return written
