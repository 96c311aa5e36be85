"""The event stream: live order, resume after an id, a model filter, heartbeats, a slow client
dropped rather than buffered without bound, and every stream ended by close()."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TypeVar

from modelhost.observe.stream import EventStream
from modelhost.records.events import Event, EventLog

T = TypeVar("T")


def run(test: Callable[[], Awaitable[T]]) -> T:
    return asyncio.run(asyncio.wait_for(test(), 10))


async def take(stream: AsyncIterator[Event | None], n: int) -> list[Event | None]:
    return [await anext(stream) for _ in range(n)]


def test_a_client_gets_live_events_in_order() -> None:
    async def scenario() -> list[tuple[str, str | None]]:
        log = EventLog()
        log.emit("load", "before")  # no Last-Event-ID: history is not replayed
        follow = EventStream(log).follow()
        pending = asyncio.ensure_future(take(follow, 2))
        await asyncio.sleep(0)
        log.emit("load", "a")
        log.emit("evict", "a")
        return [(e.kind, e.model) for e in await pending if e]

    assert run(scenario) == [("load", "a"), ("evict", "a")]


def test_a_client_resumes_after_the_last_event_it_saw() -> None:
    async def scenario() -> list[int]:
        log = EventLog()
        for name in "abcd":
            log.emit("load", name)
        follow = EventStream(log).follow(after_id=2)
        first = await take(follow, 2)
        log.emit("evict", "a")
        return [e.id for e in [*first, *await take(follow, 1)] if e]

    assert run(scenario) == [3, 4, 5]


def test_the_model_filter_keeps_one_models_events() -> None:
    async def scenario() -> list[str | None]:
        log = EventLog()
        log.emit("load", "a")
        log.emit("load", "b")
        follow = EventStream(log).follow(after_id=0, model="b")
        first = await take(follow, 1)
        log.emit("evict", "a")
        log.emit("evict", "b")
        return [f"{e.kind} {e.model}" for e in [*first, *await take(follow, 1)] if e]

    assert run(scenario) == ["load b", "evict b"]


def test_silence_is_broken_by_heartbeats() -> None:
    async def scenario() -> list[Event | None]:
        return await take(EventStream(EventLog(), heartbeat_s=0.01).follow(), 2)

    assert run(scenario) == [None, None]


def test_lagging_client_is_dropped_and_resumes() -> None:
    """A client a whole queue behind is dropped and can resume."""

    async def scenario() -> tuple[list[int], int, list[int]]:
        log = EventLog()
        stream = EventStream(log, queue_events=3)
        follow = stream.follow()
        first = asyncio.ensure_future(take(follow, 1))
        await asyncio.sleep(0)
        for name in "abcdef":  # six events at once: the client's queue holds three
            log.emit("load", name)
        seen = [e.id for e in [*await first, *await _all(follow)] if e]  # then it ends
        clients = stream.clients
        resumed = [e.id for e in await take(stream.follow(after_id=seen[-1]), 3) if e]
        return seen, clients, resumed

    seen, clients, resumed = run(scenario)
    assert seen == [1, 2, 3]  # what its queue held, then the end of the stream
    assert clients == 0
    assert resumed == [4, 5, 6]


def test_close_ends_open_streams_and_refuses_new_ones() -> None:
    async def scenario() -> tuple[list[Event | None], list[Event | None]]:
        log = EventLog()
        stream = EventStream(log)
        follow = stream.follow()
        everything = asyncio.ensure_future(_all(follow))
        await asyncio.sleep(0)
        log.emit("load", "a")
        stream.close()
        return await everything, await _all(stream.follow(after_id=0))

    ended, refused = run(scenario)
    assert [e.model for e in ended if e] == ["a"]
    assert refused == []


async def _all(follow: AsyncIterator[Event | None]) -> list[Event | None]:
    return [event async for event in follow]


def test_filtered_client_ignores_other_models() -> None:
    """Other models' events neither fill nor drop a filtered client."""

    async def scenario() -> list[str | None]:
        log = EventLog()
        follow = EventStream(log, queue_events=2).follow(model="b")
        first = asyncio.ensure_future(take(follow, 2))
        await asyncio.sleep(0)
        for _ in range(5):
            log.emit("load", "a")
        log.emit("load", "b")
        log.emit("evict", "b")
        return [f"{e.kind} {e.model}" for e in await first if e]

    assert run(scenario) == ["load b", "evict b"]


def test_a_tenant_holds_its_share_and_the_operator_keeps_one() -> None:
    """32 streams: a tenant holds at most 2 (a sixteenth), and the tenants together all but the
    operator's share."""

    async def scenario() -> list[str]:
        log = EventLog()
        stream = EventStream(log, max_clients=32, heartbeat_s=60)
        held = []
        for tenant in [f"t{n}" for n in range(15) for _ in range(2)]:
            held.append(stream.follow(after_id=0, tenant=tenant))
            log.emit("load", "a")
            await anext(held[-1])  # the stream counts once it started
        refusals = [stream.refusal("t0"), stream.refusal("t15")]
        operator = stream.follow(after_id=0)
        await anext(operator)
        await held[0].aclose()
        return [*refusals, stream.refusal("t15"), stream.refusal("t0")]

    refused_t0, refused_t15, freed_t15, freed_t0 = run(scenario)
    assert "tenant t0 holds 2 event streams" in refused_t0
    assert "the tenants hold every event stream but the operator's" in refused_t15
    assert freed_t15 == freed_t0 == ""
