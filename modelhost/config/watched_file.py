"""A settings file while the server runs: read at start, and again whenever it changes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Generic, TypeVar

from modelhost.errors import ConfigError

logger = logging.getLogger("modelhost")

POLL_INTERVAL_S = 1.0
Stamp = tuple[int, int, int]  # modified (ns), size, inode: a replaced file changes one
T = TypeVar("T")


def stamp(path: Path) -> Stamp | None:
    """What tells one version of the file from the next; None while it cannot be seen."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_mtime_ns, info.st_size, info.st_ino


class WatchedFile(Generic[T]):
    """Holds `current`, the last good reading (`<kind>_loaded`); a changed file with a mistake
    keeps it and says why (`<kind>_rejected`, a warning). The file is read on a thread."""

    def __init__(
        self,
        kind: str,
        path: str,
        emit: Callable[..., Any],
        initial: T,
        describe: Callable[[T], dict[str, Any]],
        interval_s: float = POLL_INTERVAL_S,
    ) -> None:
        self.kind, self.path = kind, Path(path) if path else None  # None: no such file
        self.emit, self.describe, self.interval_s = emit, describe, interval_s
        self.current = initial
        self._read: Callable[[Path], T] | None = None
        self._stamp: Stamp | None = None

    def get(self) -> T:
        return self.current

    def open(self, read: Callable[[Path], T]) -> None:
        """Read the file at start; `read` raises ConfigError on a mistake."""
        if self.path is None:
            return
        self._read = read
        self._stamp = stamp(self.path)
        self._loaded(read(self.path))

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Poll the file while the server runs."""
        if self._read is None:
            yield
            return
        task = asyncio.create_task(self._watch())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def poll(self) -> None:
        """Reread the file if it changed since the last reading."""
        assert self.path is not None and self._read is not None
        now = stamp(self.path)
        if now == self._stamp:
            return
        self._stamp = now
        try:
            reading = await asyncio.to_thread(self._read, self.path)
        except ConfigError as error:
            what = self.kind.replace("_", " ")
            logger.warning("the %s is refused, the last good one stays: %s", what, error)
            self.emit(f"{self.kind}_rejected", detail={"error": str(error)})
            return
        self._loaded(reading)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.poll()
            except Exception:  # a bug here must not end the watching
                logger.exception("reading the %s %s failed", self.kind, self.path)

    def _loaded(self, reading: T) -> None:
        self.current = reading
        self.emit(f"{self.kind}_loaded", detail={"path": str(self.path), **self.describe(reading)})
