"""Loads that failed because of their artifact, remembered by the artifact's version.

A broken artifact fails the same way each time, and each retry would evict idle models to
make room for it. Asking the store for the version is far cheaper than a download.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from modelhost.errors import ModelhostError, ModelLoadError

TTL_S = 60.0
MAX_NAMES = 10_000

Version = Callable[[], Awaitable[str]]


@dataclass(frozen=True)
class Failed:
    version: str
    message: str
    at: float


class FailedLoads:
    def __init__(
        self,
        ttl_s: float = TTL_S,
        max_names: int = MAX_NAMES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s, self.max_names, self.clock = ttl_s, max_names, clock
        self._failed: OrderedDict[str, Failed] = OrderedDict()

    async def check(self, name: str, version: Version) -> None:
        """Raise the remembered error while the failed version is still the store's."""
        failed = self._failed.get(name)
        if failed is None:
            return
        age = self.clock() - failed.at
        if age >= self.ttl_s or await self._current(version) != failed.version:
            self._failed.pop(name, None)
            return
        raise ModelLoadError(
            f"{failed.message} (it failed {age:.0f} s ago and the store still has the same "
            f"version: replace the artifact; it is tried again after {self.ttl_s:g} s)"
        )

    async def remember(self, name: str, version: Version, error: ModelLoadError) -> None:

        current = await self._current(version)
        if current is None:
            return
        self._failed.pop(name, None)
        self._failed[name] = Failed(current, str(error), self.clock())
        if len(self._failed) > self.max_names:
            self._failed.popitem(last=False)

    @staticmethod
    async def _current(version: Version) -> str | None:
        try:
            return await version()
        except (ModelhostError, OSError):  # nothing to compare
            return None
