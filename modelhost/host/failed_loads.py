"""Loads that failed because of their artifact, remembered by the artifact's version.

A broken artifact fails the same way each time, and each retry would evict idle models to
make room for it. Asking the store for the version is far cheaper than a download.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from modelhost.cache.recent import RecentFailures
from modelhost.errors import DeadlineExceeded, ModelhostError, ModelLoadError

Version = Callable[[], Awaitable[str]]


class FailedLoads(RecentFailures):
    """Failed loads by model name; stale after the TTL or once the store's version changes."""

    TTL_S = 60.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # RecentFailures's
        super().__init__(*args, **kwargs)
        self.lost = RecentFailures(*args, **kwargs)  # loads that cost a worker once

    async def check(self, name: str, version: Version) -> None:
        """Raise the remembered error while the failed version is still the store's."""
        failed = self.recall(name)
        if failed is None:
            return
        if failed.version and await self._current(version) != failed.version:
            self.forget(name)
            return
        raise ModelLoadError(
            f"{failed.message} (it failed {self.age_s(failed):.0f} s ago and the store still "
            f"has the same version: replace the artifact; it is tried again after "
            f"{self.ttl_s:g} s)"
        )

    async def remember(self, name: str, version: Version, error: ModelLoadError) -> None:
        current = await self._current(version)
        if current is not None:
            self.keep(name, str(error), current)

    async def worker_lost(self, name: str, version: Version, error: ModelhostError) -> None:
        """A load of `name` cost its worker (it died, or was killed at the deadline): the second
        time in a row, the load is to blame and is remembered as a failed one; the first may be
        another model's doing, or a busy machine's, and is raised as it came."""
        if self.lost.recall(name) is None:
            self.lost.keep(name, str(error))
            return
        self.lost.forget(name)
        failed = ModelLoadError(f"could not load model {name}, twice in a row: {lost_why(error)}")
        await self.remember(name, version, failed)
        raise failed from error

    def hold_back(self, name: str, window_s: float) -> str:
        """Refuse `name`, any version until `remember` names one; why, in words."""
        message = (
            f"model {name} is held back: workers kept dying, or keeping memory, as they ran its "
            f"batches (two deaths' worth within {window_s:g} s), each taking its other models "
            "with it; check its handler, one that exits, crashes in native code, hangs or keeps "
            "what it is sent on some input"
        )
        self.keep(name, message)
        return message

    def loaded(self, name: str) -> None:
        self.lost.forget(name)

    @staticmethod
    async def _current(version: Version) -> str | None:
        try:
            return await version()
        except (ModelhostError, OSError):  # nothing to compare
            return None


def lost_why(error: ModelhostError) -> str:
    """Why a load that cost its worker twice is the artifact's fault, and what to do."""
    how = "missed the load's deadline" if isinstance(error, DeadlineExceeded) else "died"
    return (
        f"each try cost its worker (the last {how}); check the model's handler, one that exits, "
        "crashes in native code or hangs, or raise its load_timeout_s or "
        "--worker-load-timeout-s if it is only slow"
    )
