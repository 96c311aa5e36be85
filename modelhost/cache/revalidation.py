"""Revalidation against the store; a store that cannot answer leaves the copy in service."""

from __future__ import annotations

from collections.abc import Callable

from modelhost.cache.disk_index import DiskIndex, Row
from modelhost.cache.stores import Stores
from modelhost.errors import ModelNotFound, StoreError
from modelhost.records.events import EventLog


class Revalidation:
    """Asks the store whether a cached artifact's ETag changed, at most every `interval_s`."""

    def __init__(
        self,
        index: DiskIndex,
        *,
        stores: Stores,
        events: EventLog,
        interval_s: float,
        clock: Callable[[], float],
        delete: Callable[[str, str], None],
    ) -> None:
        self.index, self.stores, self.events = index, stores, events
        self.interval_s = interval_s  # 0: never
        self.clock = clock
        self.delete = delete  # (name, reason)

    def due(self, name: str) -> bool:
        return bool(self.interval_s) and self._due(self.index.get(name))

    def _due(self, row: Row | None) -> bool:
        if not self.interval_s or row is None or row.etag is None:
            return False
        return self.clock() - row.checked_at >= self.interval_s

    async def check(self, name: str) -> bool:
        """Delete a stale copy, if due; True if stale."""
        row = self.index.get(name) if self.interval_s else None
        return row is not None and await self.stale(row)

    async def stale(self, row: Row) -> bool:
        """`check` of a row already read."""
        if not self._due(row):
            return False
        name = row.name
        self.index.vouch(name, self.clock())
        store, key = self.stores.locate(row.source)
        try:
            etag = (await store.stat(key)).etag
        except (StoreError, ModelNotFound) as error:
            self.events.emit("failure", name, reason="revalidate", detail={"error": str(error)})
            return False
        if etag == row.etag:
            return False
        self.delete(name, "stale")
        return True
