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


def write(handler: Handler, request: Load) -> int:
    """Write the fast copy the request has room for, if `handler` is one of scikit-learn's just
    loaded from its artifact; the bytes written (0: none). Written aside, renamed when whole."""
    inner = handler.inner if isinstance(handler, SpeaksOip) else handler
    if not request.fast_copy_room or type(inner) is not SklearnHandler:
        return 0
    path = Path(request.fast_copy)
    aside = path.with_name(f".{path.name}.{os.getpid()}")  # the host deletes it if we die
    try:
        with aside.open("wb") as file:
            pickle.dump(inner.model, BoundedFile(file, request.fast_copy_room), protocol=5)
        written = aside.stat().st_size
        aside.rename(path)
    except Exception:  # noqa: BLE001  (no room, a full disk, an object that cannot be pickled)
        aside.unlink(missing_ok=True)
        return 0
    return written
