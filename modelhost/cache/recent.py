"""Failures remembered for a while by key, so that a repeat is answered without the work.

Two memories share it and differ in when a failure goes stale: `MissingUrls` (missing.py) by
time alone, `FailedLoads` (host/failed_loads.py) also when the store's version changes.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

MAX_KEYS = 10_000


@dataclass(frozen=True)
class Failure:
    message: str
    at: float  # by the memory's clock
    version: str = ""  # of what failed, where the caller compares versions


class RecentFailures:
    """The most recent `max_keys` failures, each recalled for `ttl_s` at most."""

    TTL_S: ClassVar[float] = 60.0

    def __init__(
        self,
        ttl_s: float | None = None,
        max_keys: int = MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = self.TTL_S if ttl_s is None else ttl_s
        self.max_keys, self.clock = max_keys, clock
        self._failed: OrderedDict[str, Failure] = OrderedDict()

    def recall(self, key: str) -> Failure | None:
        """The failure kept for `key` if it is younger than the TTL; an older one is forgotten."""
        failed = self._failed.get(key)
        if failed is not None and self.age_s(failed) >= self.ttl_s:
            self.forget(key)
            return None
        return failed

    def age_s(self, failure: Failure) -> float:
        return self.clock() - failure.at

    def keep(self, key: str, message: str, version: str = "") -> None:
        self._failed.pop(key, None)
        self._failed[key] = Failure(message, self.clock(), version)
        if len(self._failed) > self.max_keys:
            self._failed.popitem(last=False)

    def forget(self, key: str) -> None:
        self._failed.pop(key, None)
