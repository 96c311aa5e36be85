"""Filling one cache entry, growing its disk reservation as the bytes come."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from modelhost.cache.disk_budget import DiskBudget, Reservation, RoomFirst
from modelhost.cache.download import DownloadPolicy, download
from modelhost.cache.entries import tree_bytes
from modelhost.cache.stores import ObjectInfo, Store
from modelhost.cache.unpack import unpack_archive
from modelhost.fair_slots import FairSlots
from modelhost.records.events import EventLog
from modelhost.records.progress import QUEUED, UNPACKING, DownloadProgress, report
from modelhost.resources import nicer_thread
from modelhost.urls import redact_url

STEP_BYTES = 32 * 2**20  # room for an unknown total grows by this much
UNPACK_NICENESS = 10  # decisions.md, "Archives unpack on threads of their own"


class Unpackers:
    """Threads of their own for unpacking archives, taken in the tenants' fair order."""

    def __init__(self, threads: int, weight: Callable[[str], float]) -> None:
        self.slots = FairSlots(threads, weight=weight)
        nicer = functools.partial(nicer_thread, UNPACK_NICENESS)
        self.executor = ThreadPoolExecutor(threads, "unpack", initializer=nicer)

    @contextlib.asynccontextmanager
    async def turn(self, tenant: str, waits: Callable[[], None]) -> AsyncIterator[Executor]:
        """A thread, once the fair order gives `tenant` one; `waits` is told if none is free."""
        ticket = self.slots.take_free(tenant)
        if ticket is None:
            waits()
            ticket = await self.slots.acquire(tenant)
        try:
            yield self.executor
        finally:
            self.slots.release(ticket, None)

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class UnpackLimits:
    """What unpacking one archive may write; a tar bomb stops at either."""

    max_bytes: int
    max_files: int


@dataclass(frozen=True)
class Filling:
    """Model `name`'s entry being built under `reservation`."""

    name: str
    reservation: Reservation
    budget: DiskBudget
    events: EventLog

    async def download(
        self, store: Store, key: str, dest: Path, policy: DownloadPolicy, slots: FairSlots
    ) -> tuple[ObjectInfo, float]:
        """The object's info and the milliseconds it took."""
        name, reservation, base = self.name, self.reservation, self.reservation.bytes

        progress = DownloadProgress(self.events, name)

        def room_for(info: ObjectInfo) -> None:
            progress.start(info.size)
            if info.size is not None:
                self.budget.grow(reservation, name, base + info.size, base + info.size)

        def room_for_bytes(received: int) -> None:  # a size the store did not announce
            if base + received > reservation.bytes:
                wanted = base + received + STEP_BYTES
                self.budget.grow(reservation, name, base + received, wanted)

        # held while bytes flow, not while the store is asked
        slot = RoomFirst(reservation, slots)
        done = await download(
            store,
            key,
            dest,
            policy,
            room_for,
            slot=slot,
            room_for_bytes=room_for_bytes,
            on_received=progress,
        )
        await self.budget.grow_async(reservation, name, base + done.bytes, base + done.bytes)
        self.events.emit(
            "download",
            name,
            bytes=done.bytes,
            duration_ms=round(done.duration_ms, 2),
            reason="miss",
            detail={
                "url": redact_url(store.url_of(key)),
                "attempts": done.attempts,
                "bytes_per_s": round(done.bytes / max(done.duration_ms / 1000, 1e-6)),
            },
        )
        return done.info, done.duration_ms

    async def unpack(
        self, archive: Path, dest: Path, limits: UnpackLimits, unpackers: Unpackers
    ) -> Path:
        loop = asyncio.get_running_loop()
        name, reservation, base = self.name, self.reservation, self.reservation.bytes

        def room_for(written: int) -> None:  # runs in the unpacking thread
            needed = base + written
            if needed > reservation.bytes:
                grow = self.budget.grow_async(reservation, name, needed, needed + STEP_BYTES)
                asyncio.run_coroutine_threadsafe(grow, loop).result()

        unpack = functools.partial(
            unpack_archive,
            archive,
            dest,
            max_bytes=limits.max_bytes,
            max_files=limits.max_files,
            on_bytes=room_for,
        )
        queued = functools.partial(report, self.events, name, QUEUED)
        async with unpackers.turn(reservation.tenant, queued) as executor:
            started = time.perf_counter()
            report(self.events, name, UNPACKING, 0, archive.stat().st_size)
            await loop.run_in_executor(executor, unpack)
        self.events.emit(
            "unpack",
            name,
            bytes=await asyncio.to_thread(tree_bytes, dest),
            reason="archive",
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
        return dest
