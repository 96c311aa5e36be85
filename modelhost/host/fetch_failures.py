"""Failed fetches' events; a missing name's, once while the store's answer is remembered."""

from __future__ import annotations

import time
from collections.abc import Callable

from modelhost.cache.missing import MissingUrls
from modelhost.cache.recent import RecentFailures
from modelhost.errors import ModelhostError, ModelNotFound
from modelhost.records.events import EventLog


class FetchFailures:
    """A missing name retried is reported once a while: the log and history keep room."""

    def __init__(self, events: EventLog, clock: Callable[[], float] = time.monotonic) -> None:
        self.events = events
        self.reported = RecentFailures(MissingUrls.TTL_S, clock=clock)

    def failed(self, name: str, error: ModelhostError) -> None:
        if not isinstance(error, ModelNotFound):
            self.events.emit("failure", name, reason="fetch", detail={"error": str(error)})
        elif self.reported.recall(name) is None:
            self.reported.keep(name, "")
            detail = {"error": str(error)}
            self.events.emit("failure", name, per_model=False, reason="not_found", detail=detail)
