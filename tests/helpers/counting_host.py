"""A ModelHost whose places of names count what they are asked for: the memory tier's
residents, the disk tier, the registrations and the store's listing. The listing tests measure a
page by these counts, never by time."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
from sortedcontainers import SortedDict, SortedList
from starlette.requests import Request

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import MemoryBudget, MemoryTier, Resident, State
from modelhost.cache.stores.memory import MemoryStore
from modelhost.host import ModelHost
from modelhost.records.events import EventLog


def entry(name: str) -> Artifact:
    """A cached artifact fetched from where the store has `name`."""
    return Artifact(name, Path("/nowhere"), 1024, source=f"file:///{name}")


class Tally:
    """Names handed out by one place, whatever the call."""

    def __init__(self) -> None:
        self.names = 0

    def counted(self, names: Iterable[str]) -> Iterator[str]:
        for name in names:
            self.names += 1
            yield name


class CountingDict(dict[str, Any]):
    """A dict whose every walk over its names is tallied (lookups by name are not)."""

    def __init__(self, tally: Tally, *args: Any) -> None:
        super().__init__(*args)
        self.tally = tally

    def __iter__(self) -> Iterator[str]:
        return self.tally.counted(super().__iter__())

    def keys(self) -> Any:
        return list(self.tally.counted(super().keys()))

    def items(self) -> Any:
        return [(name, self[name]) for name in self.tally.counted(super().keys())]

    def values(self) -> Any:
        return [value for _, value in self.items()]


class CountingSources(SortedDict):  # type: ignore[misc]
    """Registrations (name → URL) whose walks and positional reads are tallied."""

    def __init__(self, tally: Tally, *args: Any) -> None:
        super().__init__(*args)
        self.tally = tally
        walk: Callable[..., Iterator[str]] = self._list.irange
        self.irange = lambda *a, **kw: tally.counted(walk(*a, **kw))
        islice: Callable[..., Iterator[str]] = self._list.islice
        self.islice = lambda *a, **kw: tally.counted(islice(*a, **kw))

    def __iter__(self) -> Iterator[str]:
        return self.tally.counted(super().__iter__())

    def peekitem(self, index: int = -1) -> tuple[str, str]:
        self.tally.names += 1
        return cast(tuple[str, str], super().peekitem(index))


class CountingStore(MemoryStore):
    """A store whose listing pages are tallied by the names they hand out."""

    def __init__(self, tally: Tally, names: Iterable[str]) -> None:
        super().__init__({name: b"" for name in names})
        self.tally = tally
        self.index = SortedList(self.objects)

    async def list_keys(self, after: str = "", limit: int = 1000) -> list[str]:
        start = self.index.bisect_right(after)
        return list(self.tally.counted(self.index.islice(start, start + limit)))


class CountingDisk:
    """The disk tier's index of names, as its SQLite index answers: one ordered range a call."""

    def __init__(self, tally: Tally, names: Iterable[str], store: CountingStore) -> None:
        self.tally = tally
        self.index = SortedList(names)
        self.artifacts = CountingDict(tally, {name: entry(name) for name in self.index})
        self.budget_bytes = 1 << 40
        self.used_bytes = 0
        url_of = staticmethod(lambda name: f"file:///{name}")
        self.stores = type("Stores", (), {"url_of": url_of, "default": store})

    def names(self, after: str = "", limit: int = 100) -> list[str]:
        start = self.index.bisect_right(after)
        return list(self.tally.counted(self.index.islice(start, start + limit)))

    def sources(self, after: str = "", limit: int = 100) -> list[tuple[str, str]]:
        return [(name, entry(name).source) for name in self.names(after, limit)]

    def get(self, name: str) -> Artifact | None:
        return cast(Artifact | None, dict.get(self.artifacts, name))

    def add(self, name: str) -> None:
        if name not in self.index:
            self.index.add(name)
        dict.__setitem__(self.artifacts, name, entry(name))

    def discard(self, name: str) -> None:
        self.index.discard(name)
        dict.pop(self.artifacts, name, None)


class Pool:
    workers: dict[int, Any] = {}
    threads = 1
    load_timeout_s = 300.0

    def pids(self) -> list[int]:
        return []


class Places:
    """The tallies of one host's three places of names."""

    def __init__(self) -> None:
        self.memory, self.disk, self.registered, self.store = Tally(), Tally(), Tally(), Tally()

    def reset(self) -> None:
        self.memory.names = self.disk.names = self.registered.names = self.store.names = 0


def counting_host(
    loaded: Iterable[str] = (),
    on_disk: Iterable[str] = (),
    registered: Iterable[str] = (),
    loading: Iterable[str] = (),
    stored: Iterable[str] = (),
) -> tuple[ModelHost, Places]:
    """A host (no workers) that knows these names, and the tallies of what a call reads."""
    places = Places()
    memory = MemoryTier(MemoryBudget(1 << 40, 0))
    disk = CountingDisk(places.disk, on_disk, CountingStore(places.store, stored))
    host = ModelHost(
        cast(Any, Pool()),
        memory,
        cast(Any, disk),
        EventLog(),
        pinned=frozenset(),
        deadline_s=5.0,
        pss_bytes=lambda: 0,
    )
    residents = {name: Resident(name, 1024, state=State.LOADED) for name in loaded}
    residents |= {name: Resident(name, 1024, state=State.LOADING) for name in loading}
    memory.ledger.residents = CountingDict(places.memory, residents)
    sources = {name: f"file:///{name}" for name in registered}  # their entries came from there
    host.residency.sources = CountingSources(places.registered, sources)
    return host, places


def request(path: str, query: dict[str, Any] | None = None) -> Request:
    """A GET the route handlers take directly: no transport, so a page is only the handler."""
    encoded = httpx.QueryParams(query or {})
    scope = {
        "type": "http",
        "method": "GET",
        "path": path,
        "query_string": str(encoded).encode(),
        "headers": [],
        "client": ("127.0.0.1", 40000),
    }
    return Request(scope)


def answer(
    handler: Callable[[Request], Any], path: str, query: dict[str, Any] | None = None
) -> Any:
    """The status and JSON body a route handler answers with."""
    response = asyncio.run(handler(request(path, query)))
    return response.status_code, json.loads(bytes(response.body))
