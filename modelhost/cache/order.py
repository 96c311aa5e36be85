"""Loaded models in an eviction policy's order, read lazily from a heap.

A model is pushed when it loads or its key falls; an entry behind its model's key is pushed
again when it reaches the top. A hit only raises a key, so it pushes nothing, and choosing k
victims costs O(k log N), not a sort of every model.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Generator
from typing import Any, Generic, Protocol, TypeVar


class Ordered(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def seq(self) -> int: ...


T = TypeVar("T", bound=Ordered)
Entry = tuple[Any, int, int, Any]  # (key, seq, version, item): seq breaks ties, as a stable sort


class LazyOrder(Generic[T]):
    """`key` orders, lowest first; `current` says whether an item still belongs."""

    def __init__(self, key: Callable[[T], Any], current: Callable[[T], bool]) -> None:
        self.key, self.current = key, current
        self._heap: list[Entry] = []
        self._latest: dict[str, tuple[Any, int, T]] = {}  # name → the key and version pushed
        self._versions = itertools.count()
        self._walks = 0  # a compaction would put back what a walk has taken out

    def __len__(self) -> int:
        """Items added and not forgotten."""
        return len(self._latest)

    def add(self, item: T) -> None:
        key, version = self.key(item), next(self._versions)
        self._latest[item.name] = (key, version, item)
        heapq.heappush(self._heap, (key, item.seq, version, item))
        if not self._walks and len(self._heap) > 2 * len(self._latest) + 64:
            self._compact()

    def touched(self, item: T) -> None:
        """After a change of its key: pushed again only if the key fell."""
        latest = self._latest.get(item.name)
        if latest is not None and latest[2] is item and self.key(item) < latest[0]:
            self.add(item)

    def forget(self, name: str) -> None:
        self._latest.pop(name, None)

    def walk(self) -> Generator[T, None, None]:
        """The current items in order; close it, and each one it yielded is pushed again."""
        yielded: list[T] = []
        self._walks += 1
        try:
            while self._heap:
                key, _, version, item = self._heap[0]
                latest = self._latest.get(item.name)
                heapq.heappop(self._heap)
                if latest is None or latest[1] != version or not self.current(item):
                    continue  # an older entry, or an item gone
                if self.key(item) != key:
                    self.add(item)  # its key moved since: in its place now
                    continue
                yielded.append(item)
                yield item
        finally:
            self._walks -= 1
            for item in yielded:
                if self.current(item):
                    self.add(item)

    def first(self) -> T | None:
        walk = self.walk()
        try:
            return next(walk, None)
        finally:
            walk.close()

    def _compact(self) -> None:
        latest = {n: e for n, e in self._latest.items() if self.current(e[2])}
        self._latest = latest
        self._heap = [(key, item.seq, version, item) for key, version, item in latest.values()]
        heapq.heapify(self._heap)
