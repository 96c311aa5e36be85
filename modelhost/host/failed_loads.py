"""Loads that failed because of their artifact, remembered by the artifact's version.

A broken artifact fails the same way each time, and each retry would evict idle models to
make room for it. Asking the store for the version is far cheaper than a download.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from modelhost.cache.recent import RecentFailures
from modelhost.errors import ModelhostError, ModelLoadError

Version = Callable[[], Awaitable[str]]


class FailedLoads(RecentFailures):
    """Failed loads by model name; stale after the TTL or once the store's version changes."""

    TTL_S = 60.0

    async def check(self, name: str, version: Version) -> None:
        """Raise the remembered error while the failed version is still the store's."""
        failed = self.recall(name)
        if failed is None:
            return
        if await self._current(version) != failed.version:
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

    @staticmethod
    async def _current(version: Version) -> str | None:
        try:
            return await version()
        except (ModelhostError, OSError):  # nothing to compare
            return None
