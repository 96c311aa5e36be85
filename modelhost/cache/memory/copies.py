"""The bytes of a model's copies on more workers: room for one more, joined, left."""

from __future__ import annotations

from collections.abc import Callable

from modelhost.cache.memory.ledger import Ledger, Resident


class CopyRoom:
    """A copy takes only room that is free: it never evicts."""

    def __init__(
        self,
        ledger: Ledger,
        shortfall_bytes: Callable[[int], int],
        over_max_bytes: Callable[[str, int], int] = lambda tenant, size_bytes: 0,
    ) -> None:
        self._ledger, self._shortfall_bytes = ledger, shortfall_bytes
        self._over_max_bytes = over_max_bytes

    def reserve(self, resident: Resident, peak_bytes: int) -> int | None:
        """Bytes for one more copy (footprint or load peak) if they fit without evicting, and
        within its tenant's maximum."""
        reserved = max(resident.footprint, peak_bytes)
        if (
            self._shortfall_bytes(reserved) > 0
            or self._over_max_bytes(resident.tenant, reserved) > 0
        ):
            return None
        self._ledger.resize(resident, resident.bytes + reserved)
        return reserved

    def add(self, resident: Resident, worker_id: int) -> None:
        self._ledger.add_worker(resident, worker_id)

    def remove(self, resident: Resident, worker_id: int) -> None:
        self._ledger.remove_worker(resident, worker_id)

    def release(self, resident: Resident, size_bytes: int | None = None) -> None:
        """A copy's footprint, or `size_bytes` of a reservation it did not use."""
        size = resident.footprint if size_bytes is None else size_bytes
        self._ledger.resize(resident, resident.bytes - size)

    def copied(self) -> list[Resident]:
        """The models held by more than one worker."""
        return list(self._ledger.copied)

    def held_by_worker(self) -> dict[int, int]:
        """The footprints of the copies each worker holds."""
        return dict(self._ledger.by_worker)
