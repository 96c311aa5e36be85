"""A worker's side of fast copies: a scikit-learn model read from or written to a plain pickle."""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

from modelhost.workers.handlers.base import Handler
from modelhost.workers.handlers.oip import SpeaksOip
from modelhost.workers.handlers.sklearn import SklearnHandler
from modelhost.workers.messages import Load

UNSHARED_SLACK_BYTES = 1 << 20  # over a quarter past the footprint


class TooLarge(Exception):
    """The copy outgrew its room."""


class BoundedFile:
    def __init__(self, file: Any, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data: Any) -> int:
        self.room -= memoryview(data).nbytes
        if self.room < 0:
            raise TooLarge
        written: int = self.file.write(data)
        return written


def read(request: Load) -> Handler | None:
    """The model from its fast copy, or None to load the artifact (a broken copy is deleted)."""
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
    """Write a scikit-learn model's fast copy if there is room; return the bytes written.

    Without a memo where possible: the unpickler's memo holds every object until the load ends
    (docs/decisions.md, "Fast copies are pickled without a memo"). Shared or cyclic parts need it.
    """
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
    """Pickle `model` within `room` bytes, renamed when whole; 0 leaves no file."""
    try:
        with aside.open("wb") as file:
            pickler = pickle.Pickler(BoundedFile(file, room), protocol=5)
            pickler.fast = not memo  # a cycle raises ValueError
            pickler.dump(model)
        written = aside.stat().st_size
        aside.rename(path)
    except Exception:  # noqa: BLE001  (no room, a full disk, a cycle, not picklable)
        aside.unlink(missing_ok=True)
        return 0
    return written
