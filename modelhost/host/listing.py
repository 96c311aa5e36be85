"""The names the host knows, in name order, a page at a time.

A page merges three ordered sources (memory tier, disk index, registrations) from a cursor, so
its cost follows the page, not the number of names; `with_store` adds the store's listing.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from modelhost.cache.memory import Resident, State
from modelhost.cache.stores import Store

IN_MEMORY = "in_memory"  # loading, loaded or unloading
LOADED = "loaded"
ON_DISK = "on_disk"
REGISTERED = "registered"
EVERYWHERE = (IN_MEMORY, ON_DISK, REGISTERED)
STATES = (LOADED, ON_DISK, REGISTERED)  # GET /models?state=


class NameIndex(Protocol):
    def names(self, after: str = "", limit: int = ...) -> list[str]: ...


class SourceIndex(Protocol):
    def sources(self, after: str = "", limit: int = ...) -> list[tuple[str, str]]: ...


class Servable:
    """The disk index's names whose entry is `current`."""

    def __init__(self, disk: SourceIndex, current: Callable[[str, str], bool]) -> None:
        self.disk, self.current = disk, current

    def names(self, after: str = "", limit: int = 100) -> list[str]:
        found: list[str] = []
        while len(found) < limit and (batch := self.disk.sources(after, limit)):
            found += [name for name, source in batch if self.current(name, source)]
            after = batch[-1][0]
        return found[:limit]


class Listing:
    def __init__(
        self,
        residents: Mapping[str, Resident],
        disk: NameIndex,
        sources: Any,
        store: Store | None = None,
    ) -> None:
        self.residents = residents
        self.disk = disk
        self.sources = sources  # a SortedDict: name → URL
        self.store = store  # the model store, whose listing `with_store` adds
        self._runs: dict[str, Callable[[str, int], Iterable[str]]] = {
            IN_MEMORY: self._in_memory,
            LOADED: self._loaded,
            ON_DISK: self._on_disk,
            REGISTERED: self._registered,
        }

    def page(self, after: str, limit: int, places: Iterable[str] = EVERYWHERE) -> list[str]:
        """Up to `limit` names after `after`, in order, from `places` only."""
        runs = [self._runs[place](after, limit) for place in places]
        return list(itertools.islice(distinct(heapq.merge(*runs)), limit))

    async def with_store(self, after: str, limit: int) -> list[str]:
        """A page of names from everywhere and the store's listing (none if it cannot list)."""
        known = self.page(after, limit)
        if self.store is None or not self.store.listable:
            return known
        stored = await self.store.list_keys(after, limit)
        return list(itertools.islice(distinct(heapq.merge(known, stored)), limit))

    def name_before(self, offset: int) -> str | None:
        """The name a TorchServe offset starts after ("" for the first; None past the end)."""
        if offset <= 0:
            return ""
        others = sorted(name for name in self.residents if name not in self.sources)
        return nth_of_two(self.sources, others, offset - 1)

    def _in_memory(self, after: str, limit: int) -> list[str]:
        return heapq.nsmallest(limit, (name for name in self.residents if name > after))

    def _loaded(self, after: str, limit: int) -> list[str]:
        ready = (n for n, r in self.residents.items() if n > after and r.state is State.LOADED)
        return heapq.nsmallest(limit, ready)

    def _on_disk(self, after: str, limit: int) -> list[str]:
        return self.disk.names(after, limit)

    def _registered(self, after: str, limit: int) -> Iterator[str]:
        walk: Iterator[str] = self.sources.irange(minimum=after, inclusive=(False, True))
        return walk


def distinct(names: Iterable[str]) -> Iterator[str]:
    """Ordered names without repeats."""
    last = None
    for name in names:
        if name != last:
            yield name
            last = name


def nth_of_two(indexed: Any, others: list[str], n: int) -> str | None:
    """The `n`th name of a SortedDict and a short disjoint list together, by bisection."""

    def rank(j: int) -> int:  # where others[j] stands in the two together
        return j + int(indexed.bisect_left(others[j]))

    low, high = 0, len(others)  # how many of `others` precede the nth
    while low < high:
        middle = (low + high) // 2
        if rank(middle) < n:
            low = middle + 1
        else:
            high = middle
    if low < len(others) and rank(low) == n:
        return others[low]
    position = n - low
    if position >= len(indexed):
        return None
    name: str = indexed.peekitem(position)[0]
    return name
