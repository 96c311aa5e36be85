"""A store held in a dict: the fake for tests, failing or stalling on request."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from modelhost.cache.stores.base import (
    LIST_PAGE_KEYS,
    KeyedByPath,
    ObjectInfo,
    Progress,
    page_of,
)
from modelhost.errors import ModelNotFound, StoreUnavailable

CHUNK_BYTES = 64 * 1024


class MemoryStore(KeyedByPath):
    listable = True

    def __init__(self, objects: dict[str, bytes] | None = None, uri: str = "memory://store"):
        self.uri = uri
        self.objects = dict(objects or {})
        self.failures_left = 0  # fetches that stop half-way, as a reset connection would
        self.stall_s = 0.0  # silence before each fetch sends anything
        self.fetches = 0

    async def stat(self, key: str) -> ObjectInfo:
        data = self._object(key)
        digest = hashlib.md5(data, usedforsecurity=False).hexdigest()
        return ObjectInfo(len(data), digest, digest)

    async def fetch(self, key: str, dest: Path, expected: ObjectInfo, progress: Progress) -> None:
        self.fetches += 1
        data = self._object(key)
        await asyncio.sleep(self.stall_s)
        sent = data[: len(data) // 2] if self.failures_left else data
        with dest.open("wb") as file:
            for start in range(0, len(sent), CHUNK_BYTES):
                file.write(sent[start : start + CHUNK_BYTES])
                progress(len(sent[start : start + CHUNK_BYTES]))
                await asyncio.sleep(0)
        if self.failures_left:
            self.failures_left -= 1
            raise StoreUnavailable(f"connection reset while sending {key}")

    async def list_keys(self, after: str = "", limit: int = LIST_PAGE_KEYS) -> list[str]:
        return page_of(sorted(self.objects), after, limit)

    def _object(self, key: str) -> bytes:
        if key not in self.objects:
            raise ModelNotFound(f"{self.url_of(key)} does not exist in the store")
        return self.objects[key]
