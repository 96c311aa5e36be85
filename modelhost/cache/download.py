"""Downloads into the disk tier: watched for stalls, verified, and retried with backoff.

A stall is a `StoreTimeout` at once, without a retry: waiting again would double the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.cache.stores import ObjectInfo, Store
from modelhost.errors import StoreTimeout, StoreUnavailable
from modelhost.units import format_bytes
from modelhost.urls import redact_url

WATCH_TICK_S = 0.25
GIVEN_UP = (
    "; check that the store is up and reachable from this server, then send the request again"
)


@dataclass(frozen=True)
class DownloadPolicy:
    attempts: int = 3
    timeout_s: float = 30.0
    backoff_s: float = 0.25
    max_backoff_s: float = 5.0

    def pause_s(self, attempt: int) -> float:
        ceiling = min(self.max_backoff_s, self.backoff_s * 2.0 ** (attempt - 1))
        return ceiling * (0.5 + random.random() / 2)


@dataclass(frozen=True)
class Downloaded:
    info: ObjectInfo
    bytes: int
    duration_ms: float
    attempts: int


class Meter:
    """Bytes received, raising past the announced size; called from any thread."""

    def __init__(
        self, url: str, announced: int | None, room_for_bytes: Callable[[int], None]
    ) -> None:
        self.url, self.announced, self.room_for_bytes = url, announced, room_for_bytes
        self.received = 0

    def __call__(self, count: int) -> None:
        self.received += count
        if self.announced is None:
            self.room_for_bytes(self.received)
        elif self.received > self.announced:
            raise StoreUnavailable(
                f"{self.url} sent more than the {format_bytes(self.announced)} it announced"
            )


async def download(
    store: Store,
    key: str,
    dest: Path,
    policy: DownloadPolicy,
    on_info: Callable[[ObjectInfo], None] = lambda info: None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    slot: contextlib.AbstractAsyncContextManager[Any] | None = None,
    room_for_bytes: Callable[[int], None] = lambda received: None,
    on_received: Callable[[int], None] = lambda received: None,
) -> Downloaded:
    """Fetch `key` into `dest`, whole and verified, or raise the store's error.

    `slot` is held around each fetch only, so a stat never waits on a download. `on_received`
    hears the bytes received so far, on the event loop, as the stall watch sees them.
    """
    started = time.perf_counter()
    for attempt in range(1, policy.attempts + 1):
        try:
            info = await store.stat(key)
            on_info(info)
            async with slot or contextlib.nullcontext():
                await fetch_watched(
                    store,
                    key,
                    dest=dest,
                    info=info,
                    timeout_s=policy.timeout_s,
                    room_for_bytes=room_for_bytes,
                    on_received=on_received,
                )
            size = await asyncio.to_thread(verify, dest, info, redact_url(store.url_of(key)))
            duration_ms = (time.perf_counter() - started) * 1000
            return Downloaded(info, size, duration_ms, attempt)
        except StoreUnavailable as error:
            dest.unlink(missing_ok=True)
            if attempt == policy.attempts:
                given_up = f"{error} (gave up after {attempt} tries){GIVEN_UP}"
                raise StoreUnavailable(given_up) from error
            await sleep(policy.pause_s(attempt))
    raise AssertionError("unreachable: the last attempt returns or raises")


async def fetch_watched(
    store: Store,
    key: str,
    *,
    dest: Path,
    info: ObjectInfo,
    timeout_s: float,
    room_for_bytes: Callable[[int], None] = lambda received: None,
    on_received: Callable[[int], None] = lambda received: None,
) -> None:
    """One try, cancelled with `StoreTimeout` if no byte arrives for `timeout_s`."""
    meter = Meter(redact_url(store.url_of(key)), info.size, room_for_bytes)
    task = asyncio.ensure_future(store.fetch(key, dest, info, meter))
    seen, quiet_since = -1, time.monotonic()
    try:
        while not task.done():
            await asyncio.wait({task}, timeout=min(WATCH_TICK_S, timeout_s))
            if meter.received != seen:
                seen, quiet_since = meter.received, time.monotonic()
                on_received(seen)
            elif not task.done() and time.monotonic() - quiet_since > timeout_s:
                raise StoreTimeout(
                    stalled(redact_url(store.url_of(key)), timeout_s, meter.received, info)
                )
        task.result()
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def stalled(url: str, timeout_s: float, received: int, info: ObjectInfo) -> str:
    total = format_bytes(info.size) if info.size is not None else "an unknown size"
    return (
        f"the store sent nothing for {timeout_s:g} s while downloading {url} "
        f"({format_bytes(received)} of {total} received); check the store, or raise "
        "--store-timeout-s"
    )


def verify(path: Path, info: ObjectInfo, url: str) -> int:
    size = path.stat().st_size
    if info.size is not None and size != info.size:
        raise StoreUnavailable(f"{url} arrived with {size} of {info.size} bytes")
    if info.md5 is not None and md5_of(path) != info.md5:
        raise StoreUnavailable(f"{url} arrived corrupt: its MD5 does not match the ETag")
    return size


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()
