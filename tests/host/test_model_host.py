"""ModelHost against a fake pool that answers at once (no processes): what it reports about the
models it holds, and the events it emits, on plain sequences. Interleavings are explored by
tests/host/machine.py; the real thing by tests/e2e."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from host.fakes import (
    ARTIFACT_BYTES,
    FOOTPRINT_BYTES,
    AnsweringPool,
    Call,
    FakeDisk,
    FakePool,
    RecordedEvents,
    host_with,
)
from modelhost.cache.memory import MemoryBudget, MemoryTier, State
from modelhost.cache.policy import CostAwarePolicy, EvictionPolicy, LRUPolicy
from modelhost.errors import ModelNotFound, PoisonRequest, Unavailable, WorkerDied
from modelhost.host import Invocation, ModelHost
from modelhost.host.manifests import estimate_footprint
from modelhost.manifest import Manifest
from modelhost.records.events import EventLog
from modelhost.workers.messages import Answered, Infer, Load, Unload

ROOM_FOR_TWO = FOOTPRINT_BYTES + estimate_footprint(ARTIFACT_BYTES) + 1  # one loaded, one loading


def host_on(tmp_path: Path, policy: EvictionPolicy, events: RecordedEvents) -> ModelHost:
    memory = MemoryTier(MemoryBudget(ROOM_FOR_TWO, 0), policy)
    return ModelHost(
        AnsweringPool(2),
        memory,
        FakeDisk(tmp_path),
        events,
        pinned=frozenset({"pinned"}),
        deadline_s=5.0,
        pss_bytes=lambda: memory.committed_bytes,
    )


def invoke_each(host: ModelHost, names: list[str]) -> list[bytes]:
    async def scenario() -> list[bytes]:
        invocation = Invocation(b"[1]", "application/json", "application/json")
        return [(await host.invoke(name, invocation)).body for name in names]

    return asyncio.run(scenario())


def test_statistics_count_what_is_loaded_and_where(tmp_path: Path) -> None:
    host = host_on(tmp_path, LRUPolicy(), RecordedEvents())
    assert invoke_each(host, ["a", "b"]) == [b"ok", b"ok"]
    stats = host.statistics()
    assert stats.memory.models == {"loading": 0, "loaded": 2, "unloading": 0}
    assert set(stats.memory.footprints) == {"a", "b"}
    assert stats.memory.committed_bytes == sum(stats.memory.footprints.values())
    assert [w.worker_id for w in stats.workers] == [1, 2]
    assert stats.batching.requests == 2


def test_a_models_statistics_say_where_it_is(tmp_path: Path) -> None:
    host = host_on(tmp_path, LRUPolicy(), RecordedEvents())
    invoke_each(host, ["a", "a"])
    loaded = host.model_statistics("a")
    assert (loaded.state, loaded.hits, loaded.in_flight) == ("loaded", 2, 0)  # both served
    assert len(loaded.workers) == 1 and loaded.memory_bytes > 0
    assert host.model_statistics("never-seen").state == "remote"
    assert host.model_statistics("pinned").pinned


def test_a_models_last_use_reads_the_same_until_it_is_used_again(tmp_path: Path) -> None:
    """Triton's last_inference is read from it: two reads must agree, not drift by a clock."""
    host = host_on(tmp_path, LRUPolicy(), RecordedEvents())
    invoke_each(host, ["a"])
    first = host.model_statistics("a").last_used
    assert first is not None and abs(first - time.time()) < 60
    assert host.model_statistics("a").last_used == first


def test_an_eviction_names_the_policy_that_chose_it(tmp_path: Path) -> None:
    for policy in (LRUPolicy(), CostAwarePolicy()):
        events = RecordedEvents()
        host = host_on(tmp_path, policy, events)
        invoke_each(host, ["a", "b", "c"])
        evictions = [
            (model, fields["reason"]) for kind, model, fields in events.emitted if kind == "evict"
        ]
        assert len(evictions) == 1 and evictions[0][1] == policy.name, evictions
        evicted = evictions[0][0]
        assert evicted is not None and host.state_of(evicted) is None


def test_a_load_waiting_for_a_busy_worker_evicts_nothing(tmp_path: Path) -> None:
    """One worker, room for two: while b loads, c's load waits for the worker and holds no room,
    so a (loaded, idle) stays. Reserving first let c evict a for a load that could not start."""
    pool = FakePool(1)
    host = host_with(pool, tmp_path, {}, budget_bytes=ROOM_FOR_TWO)
    memory = host.memory
    invocation = Invocation(b"[1]", "application/json", "application/json")

    async def scenario() -> None:
        first = asyncio.ensure_future(host.invoke("a", invocation))
        while not first.done():  # a's load, then its batch
            if pool.calls:
                pool.answer(pool.calls[0])
            await asyncio.sleep(0)
        requests = [asyncio.ensure_future(host.invoke(name, invocation)) for name in "bc"]
        await until_called(pool)
        for _ in range(10):
            await asyncio.sleep(0)
        assert [type(call.request) for call in pool.calls] == [Load]  # b's; c waits its turn
        resident = memory.get("a")
        assert resident is not None and resident.state is State.LOADED
        for task in requests:
            task.cancel()

    asyncio.run(scenario())
    assert not any(isinstance(c.request, Unload) for c in pool.calls)


async def until_called(pool: FakePool) -> None:
    while not pool.calls:
        await asyncio.sleep(0)


class DyingPool(AnsweringPool):
    """Answers at once, but a batch of a model in `kills` takes its worker down with it."""

    def __init__(self, size: int, kills: set[str], pure: bool = True) -> None:
        super().__init__(size)
        self.kills, self.pure, self.deaths = kills, pure, 0

    def respond(self, call: Call) -> None:
        if isinstance(call.request, Infer) and call.request.model in self.kills:
            self.deaths += 1
            self.kill(call.worker)
        else:
            self.answer(call)


async def invoke_once(host: ModelHost, name: str) -> bytes:
    return (await host.invoke(name, Invocation(b"[1]", "application/json", ""))).body


def test_worker_death_is_retried(tmp_path: Path) -> None:
    """A built-in handler is pure: its worker's death costs a retry, not a 503."""
    pool = DyingPool(2, kills=set())
    host = host_with(pool, tmp_path, {})

    async def scenario() -> bytes:
        await invoke_once(host, "a")
        pool.kills.add("a")
        first = asyncio.ensure_future(invoke_once(host, "a"))
        while not pool.deaths:
            await asyncio.sleep(0)
        pool.kills.clear()  # the retry's worker survives
        return await first

    assert asyncio.run(scenario()) == b"ok"
    assert host.queues.batching.retried == 1


def test_two_deaths_make_a_poison_request(tmp_path: Path) -> None:
    """A request that kills two workers is refused, and the pool carries on."""
    pool = DyingPool(2, kills={"poison"})
    host = host_with(pool, tmp_path, {})

    async def scenario() -> None:
        with pytest.raises(PoisonRequest, match="not tried again"):
            await invoke_once(host, "poison")
        assert await invoke_once(host, "fine") == b"ok"  # the pool carries on

    asyncio.run(scenario())
    assert pool.deaths == 2


def test_user_handler_retried_only_if_idempotent(
    tmp_path: Path,
) -> None:
    """A user's handler is retried after a death only when its manifest says idempotent; not
    retried, the answer says why, and does not call a retry safe."""
    for idempotent, expected, why in (
        (False, WorkerDied, "not tried again: its handler is not marked idempotent"),
        (True, PoisonRequest, "not tried again"),
    ):
        pool = DyingPool(2, kills={"user"}, pure=False)
        host = host_with(pool, tmp_path, {"user": Manifest(idempotent=idempotent)})
        with pytest.raises(expected, match=why) as raised:
            asyncio.run(invoke_once(host, "user"))
        assert "retry is safe" not in str(raised.value)
        assert pool.deaths == (2 if idempotent else 1)


class NoSuchModels(FakeDisk):
    async def materialize(self, name: str, url: str, tenant: str = "") -> Any:
        raise ModelNotFound(f"no model {name} in the store")


def test_unknown_name_leaves_no_history(tmp_path: Path) -> None:
    """A made-up name's failure is logged and published but kept in no history."""
    events = EventLog()
    seen: list[str] = []
    events.subscribe(lambda event: seen.append(event.kind))
    host = ModelHost(
        FakePool(1),
        MemoryTier(MemoryBudget(2**40, 0)),
        NoSuchModels(tmp_path),
        events,
        pinned=frozenset(),
        deadline_s=5.0,
        pss_bytes=lambda: 0,
    )
    for i in range(100):
        with pytest.raises(ModelNotFound):
            asyncio.run(invoke_once(host, f"made-up/{i}.joblib"))
    assert seen == ["failure"] * 100
    assert events.models_with_events() == 0


def test_load_waits_for_a_replacement_worker(tmp_path: Path) -> None:
    """With every worker down, a load waits for the first one back instead of a 503."""
    pool = AnsweringPool(1)
    host = host_with(pool, tmp_path, {})
    pool.workers.pop(1).alive = False

    async def scenario() -> bytes:
        loading = asyncio.ensure_future(invoke_once(host, "a"))
        await asyncio.sleep(0.05)
        assert not loading.done()
        pool.spawn()
        return await loading

    assert asyncio.run(scenario()) == b"ok"


def test_load_gives_up_at_its_deadline(tmp_path: Path) -> None:
    """A load gives up at its deadline when the workers stay down."""
    pool = AnsweringPool(1)
    host = host_with(pool, tmp_path, {})
    host.copies.deadline_s = 0.05
    pool.workers.pop(1).alive = False
    with pytest.raises(Unavailable, match="no worker is running"):
        asyncio.run(invoke_once(host, "a"))


class GarblingPool(AnsweringPool):
    """Answers the first batch with a reply that has no answer for its request (a defect)."""

    garbled = False

    def answer(self, call: Call) -> None:
        if isinstance(call.request, Infer) and not self.garbled:
            self.garbled = True
            self.calls.remove(call)
            call.future.set_result((Answered((), 1.0), b""))
            return
        super().answer(call)


def test_unreadable_reply_fails_and_frees_worker(
    tmp_path: Path,
) -> None:
    """An unreadable batch reply fails its requests and frees the worker's slot."""
    host = host_with(GarblingPool(1), tmp_path, {})

    async def scenario() -> bytes:
        with pytest.raises(ValueError):
            await invoke_once(host, "a")
        return await asyncio.wait_for(invoke_once(host, "a"), 5)

    assert asyncio.run(scenario()) == b"ok"
