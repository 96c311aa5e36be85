"""The disk budget: running totals of what the cache holds, and room made by deleting.

A deleted entry's bytes count until a thread has removed it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path

from modelhost.cache.disk_index import DiskIndex, Row
from modelhost.cache.disk_quotas import DiskQuotas
from modelhost.cache.entries import remove_tree
from modelhost.cache.fast_copies import FastCopies
from modelhost.cache.quotas import Limits, no_limits
from modelhost.cache.reconcile import Reconciliation
from modelhost.errors import InsufficientDisk
from modelhost.fair import Ticket
from modelhost.fair_slots import FairSlots
from modelhost.records.events import EventLog
from modelhost.units import format_bytes

FAST = {"fast_copy": True}


class Reservation:
    """Bytes an entry being built for `tenant` may write, and the deletions it waits for first."""

    def __init__(self, tenant: str = "") -> None:
        self.bytes, self.tenant = 0, tenant
        self.freeing: dict[asyncio.Future[None], int] = {}

    async def settled(self) -> None:
        """Wait until the entries deleted for this room are gone."""
        pending = [future for future in self.freeing if not future.done()]
        if pending:
            await asyncio.wait(pending)


class RoomFirst:
    """A download slot, in the tenants' fair order, once the reserved room is free on disk."""

    def __init__(self, reservation: Reservation, slots: FairSlots) -> None:
        self.reservation, self.slots = reservation, slots
        self.ticket: Ticket | None = None

    async def __aenter__(self) -> None:
        await self.reservation.settled()
        self.ticket = await self.slots.acquire(self.reservation.tenant)

    async def __aexit__(self, *exc: object) -> None:
        assert self.ticket is not None
        self.slots.release(self.ticket, None)


class DiskBudget:
    """What the cache holds against its budget, and the deletions that make room."""

    def __init__(
        self,
        budget_bytes: int,
        *,
        index: DiskIndex,
        fast_copies: FastCopies,
        entries_dir: Path,
        own_prefix: str,
        events: EventLog,
        limits: Limits = no_limits,
    ) -> None:
        self.budget_bytes, self.index, self.fast_copies = budget_bytes, index, fast_copies
        self.quotas = DiskQuotas(index, limits, self)
        self.entries_dir, self.own_prefix, self.events = entries_dir, own_prefix, events
        self.in_use: Callable[[str], bool] = lambda name: False
        self.reconciliation: Reconciliation | None = None
        self.reservations: set[Reservation] = set()
        self._trash: dict[asyncio.Future[None], int] = {}  # removals under way, their bytes
        self._trash_bytes = 0
        self._trash_numbers = itertools.count()

    @property
    def used_bytes(self) -> int:
        reserved = sum(r.bytes for r in self.reservations)
        unreconciled = self.reconciliation.unreconciled_bytes if self.reconciliation else 0
        held = self.index.entry_bytes + self._trash_bytes + unreconciled
        return held + reserved + self.fast_copies.bytes

    @property
    def free_bytes(self) -> int:
        return self.budget_bytes - self.used_bytes

    # reservations -----------------------------------------------------------------------

    async def grow_async(
        self, reservation: Reservation, name: str, minimum: int, wanted: int
    ) -> None:
        self.grow(reservation, name, minimum, wanted)
        await reservation.settled()

    def grow(self, reservation: Reservation, name: str, minimum: int, wanted: int) -> None:
        """Raise the reservation to `minimum`, deleting if need be, and to `wanted` if free
        (within its tenant's maximum too)."""
        if minimum <= reservation.bytes:
            return
        wanted = min(wanted, self.quotas.make_room(reservation, name, minimum))
        if self.free_bytes < minimum - reservation.bytes:
            self._make_room(reservation, name, minimum)
        reservation.bytes = max(minimum, min(wanted, reservation.bytes + self.free_bytes))

    async def released(self, reservation: Reservation, temp: Path) -> None:
        """Forget a reservation once a failed build's `temp` is gone, leaving no trace."""
        try:
            if temp.exists():
                await asyncio.to_thread(remove_tree, temp)
        finally:
            self.release(reservation, temp)

    def release(self, reservation: Reservation, temp: Path) -> None:
        """Forget a reservation; bytes still being deleted count until they are gone."""
        self.reservations.discard(reservation)
        for future, freeing in reservation.freeing.items():
            if not future.done():
                self._count_trash(future, freeing)
        if temp.exists():
            self._remove_later(temp, reservation.bytes)

    def drop_fast_copies(self) -> int:
        """For a full volume; returns the bytes freed."""
        freed = 0
        while self.fast_copies.copies:
            freed += self._drop_oldest_copy("disk_full")
        return freed

    def _drop_oldest_copy(self, reason: str) -> int:
        oldest = self.fast_copies.oldest() or ""
        freed = self.fast_copies.drop(oldest)
        self.events.emit("delete", oldest, bytes=freed, reason=reason, detail=FAST)
        return freed

    def _make_room(self, reservation: Reservation, name: str, minimum: int) -> None:
        """Free room for `minimum`, or delete nothing and raise if that cannot be done."""
        needed = minimum - reservation.bytes
        on_hand = self.free_bytes + self._trash_bytes + self.fast_copies.written_bytes
        victims, deletable = self._victims(needed - on_hand)
        if on_hand + deletable < needed:
            raise self._no_room(name, minimum, reservation, on_hand + deletable)
        while self.free_bytes + self._trash_bytes < needed and self.fast_copies.copies:
            self._drop_oldest_copy("disk_budget")
        for victim in victims:
            if self.free_bytes + self._trash_bytes >= needed:
                break
            self.delete(victim.name, reason="disk_budget")
        self.hand_trash_to(reservation)

    def hand_trash_to(self, reservation: Reservation) -> None:
        """The removals under way now: the reservation waits for them, then counts their room."""
        reservation.freeing.update(self._trash)  # written into once they are gone
        self._trash.clear()
        self._trash_bytes = 0

    def _victims(self, wanted: int) -> tuple[list[Row], int]:
        """The oldest entries no model needs, until they hold `wanted`; and their bytes."""
        if wanted <= 0 or wanted > self.index.entry_bytes:  # none needed, or all would not do
            return [], 0 if wanted <= 0 else self.index.entry_bytes
        victims: list[Row] = []
        held = 0
        for row in self.index.oldest_entries():
            if held >= wanted:
                break
            if not self.in_use(row.name):
                victims.append(row)
                held += row.bytes
        return victims, held

    def _no_room(
        self, name: str, minimum: int, reservation: Reservation, freeable: int
    ) -> InsufficientDisk:
        held = max(0, self.budget_bytes - freeable - reservation.bytes)
        return InsufficientDisk(
            f"model {name} needs {format_bytes(minimum)} of disk but the disk budget is "
            f"{format_bytes(self.budget_bytes)} with {format_bytes(held)} held by models "
            "being fetched or loaded, or whose handlers read their files; raise --disk-budget"
        )

    # deleting ---------------------------------------------------------------------------

    def delete(self, name: str, reason: str) -> None:
        """Delete `name`'s entry and fast copy; a file read in place stays."""
        freed = self.fast_copies.drop(name)
        if freed:
            self.events.emit("delete", name, bytes=freed, reason=reason, detail=FAST)
        row = self.index.get(name)
        if row is None:
            return
        self.index.remove(name)
        if row.entry is not None:
            aside = self.set_aside(self.entries_dir / row.entry)
            if aside is not None:
                self._remove_later(aside, row.bytes)
            elif self.reconciliation:
                self.reconciliation.lost(row.bytes)
            detail = {"tenant": row.tenant} if row.tenant else {}
            self.events.emit("delete", name, bytes=row.bytes, reason=reason, detail=detail)

    def set_aside(self, folder: Path) -> Path | None:
        """Rename `folder` out of the way, freeing its name; None if it is gone."""
        aside = self.entries_dir / f"{self.own_prefix}gone-{next(self._trash_numbers)}"
        try:
            folder.rename(aside)
        except FileNotFoundError:
            return None
        return aside

    async def settled(self) -> None:
        """Wait until every folder deleted so far is gone."""
        if self._trash:
            await asyncio.wait(list(self._trash))

    def _remove_later(self, path: Path, held_bytes: int) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # outside the server's loop (a test, a tool)
            remove_tree(path)
            return
        self._count_trash(loop.run_in_executor(None, remove_tree, path), held_bytes)

    def _count_trash(self, future: asyncio.Future[None], held_bytes: int) -> None:
        self._trash[future] = held_bytes
        self._trash_bytes += held_bytes
        future.add_done_callback(self._removed)

    def _removed(self, future: asyncio.Future[None]) -> None:
        self._trash_bytes -= self._trash.pop(future, 0)
