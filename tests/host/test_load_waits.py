"""Requests waiting for loads are bounded by model and by tenant, and told when to come back."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.errors import ModelLoadError, QueueFull, TenantQueueFull
from modelhost.fair import GAVE_WAY
from modelhost.host.calls import LoadOutcome
from modelhost.host.load_waits import LoadWaits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_model_takes_job_queue_size_waiting_and_refuses_the_next() -> None:
    waits = LoadWaits(2, by_tenant=False, clock=Clock())
    with contextlib.ExitStack() as stack:
        stack.enter_context(waits.waiting("cold", "a"))
        stack.enter_context(waits.waiting("cold", "b"))
        with pytest.raises(QueueFull, match="2 requests wait for its load"):
            stack.enter_context(waits.waiting("cold", "c"))
        stack.enter_context(waits.waiting("other", "a"))  # another model's load has its own
    with waits.waiting("cold", "a"):  # the waits ended: room again
        pass


def test_a_tenant_flooding_many_cold_models_is_refused_alone() -> None:
    """With tenants on, a tenant's requests waiting for any loads share one bound."""
    waits = LoadWaits(2, by_tenant=True, clock=Clock())
    with waits.waiting("cold-1", "noisy"), waits.waiting("cold-2", "noisy"):
        refused = pytest.raises(TenantQueueFull, match="tenant noisy has 2 requests waiting")
        with refused, waits.waiting("cold-3", "noisy"):
            pass
        with waits.waiting("cold-3", "quiet"):
            pass


def test_tenants_off_bound_by_model_only() -> None:
    waits = LoadWaits(1, by_tenant=False, clock=Clock())
    with waits.waiting("cold-1", ""), waits.waiting("cold-2", ""):
        pass


def test_retry_after_is_the_loads_usual_time_less_what_this_one_ran() -> None:
    clock = Clock()
    waits = LoadWaits(1, by_tenant=False, clock=clock)
    with waits.waiting("cold", ""), pytest.raises(QueueFull) as first, waits.waiting("cold", ""):
        pass
    assert first.value.retry_after_s == 1  # no load measured yet
    waits.loaded(LoadOutcome("remote", load_ms=4000.0, download_ms=6000.0))
    with waits.waiting("cold", ""):
        clock.now += 3.5
        with pytest.raises(QueueFull) as later, waits.waiting("cold", ""):
            pass
    assert later.value.retry_after_s == 7  # 10 s a load, 3.5 s of this one gone
    with waits.waiting("cold", ""):
        clock.now += 60
        with pytest.raises(QueueFull) as overdue, waits.waiting("cold", ""):
            pass
    assert overdue.value.retry_after_s == 1


def test_a_full_models_load_makes_room_from_the_tenant_holding_the_most() -> None:
    """With tenants on, a quiet tenant is not refused a shared cold model for a noisy one's
    waiters: the noisy tenant's newest gives up its place, and the load still serves the rest."""

    async def scenario() -> None:
        waits = LoadWaits(2, by_tenant=True, clock=Clock())
        load: asyncio.Future[LoadOutcome] = asyncio.get_running_loop().create_future()
        noisy = [asyncio.create_task(_wait(waits, "noisy", load)) for _ in range(2)]
        await asyncio.sleep(0)
        quiet = asyncio.create_task(_wait(waits, "quiet", load))
        await _settled()
        gave_way = noisy[1].exception()
        assert isinstance(gave_way, QueueFull) and "tenant noisy holds 2" in str(gave_way)
        assert "gave its place" in str(gave_way) and gave_way.retry_after_s == 1
        with pytest.raises(QueueFull, match="tenant noisy holds 1"):
            await _wait(waits, "noisy", load)  # held alike: the newcomer is refused
        load.set_result(LoadOutcome("remote", load_ms=5.0))
        assert [await noisy[0], await quiet] == [load.result()] * 2

    asyncio.run(scenario())


def test_a_waiter_resumes_in_the_step_its_load_ends() -> None:
    """Nothing runs between a load's end and its waiter's return, so the request pins the
    model before another task could evict it."""

    async def scenario() -> list[str]:
        waits = LoadWaits(2, by_tenant=True, clock=Clock())
        load: asyncio.Future[LoadOutcome] = asyncio.get_running_loop().create_future()
        order: list[str] = []

        async def loading() -> LoadOutcome:
            return await load

        async def request() -> None:
            with waits.waiting("cold", "a") as waiter:
                await waiter.until(loading())
            order.append("request")

        async def evictor() -> None:
            await load
            order.append("evictor")

        tasks = [asyncio.create_task(request()), asyncio.create_task(evictor())]
        await asyncio.sleep(0)
        load.set_result(LoadOutcome("remote", load_ms=5.0))
        await asyncio.gather(*tasks)
        return order

    assert asyncio.run(scenario()) == ["request", "evictor"]


arrivals = st.lists(  # a tenant's request comes, then maybe the client of an earlier one goes
    st.tuples(st.sampled_from("abc"), st.one_of(st.none(), st.integers(0, 20))), max_size=25
)


@settings(max_examples=200, deadline=None)
@given(steps=arrivals, limit=st.integers(1, 5), loads=st.booleans())
def test_a_full_load_makes_room_only_from_the_tenant_holding_the_most(
    steps: list[tuple[str, int | None]], limit: int, loads: bool
) -> None:
    """Arrivals and clients gone in any order: no more than `limit` wait; a request is refused,
    or gives up its place, only while its tenant holds no fewer than any other, and the one
    pushed out is its tenant's newest and is not left cancelled; the rest get the load's end."""
    asyncio.run(_arrive(steps, limit, loads))


async def _arrive(steps: list[tuple[str, int | None]], limit: int, loads: bool) -> None:
    waits = LoadWaits(limit, by_tenant=True, clock=Clock())
    load: asyncio.Future[LoadOutcome] = asyncio.get_running_loop().create_future()
    requests: list[tuple[str, asyncio.Task[LoadOutcome]]] = []
    for tenant, gone in steps:
        before = [(who, task) for who, task in requests if not task.done()]
        held = Counter(who for who, _ in before)
        task = asyncio.create_task(_wait(waits, tenant, load))
        requests.append((tenant, task))
        await _settled()
        pushed = [(who, each) for who, each in before if each.done()]
        if task.done():
            assert isinstance(task.exception(), QueueFull) and len(before) == limit
            assert held[tenant] == max(held.values()) and not pushed
        elif pushed:
            [(most, out)] = pushed
            assert held[most] == max(held.values()) > held[tenant]
            assert out is [each for who, each in before if who == most][-1]
            assert GAVE_WAY in str(out.exception())
            assert getattr(out, "cancelling", lambda: 0)() == 0  # Python 3.11 counts cancels
        else:
            assert len(before) < limit
        if gone is not None and gone < len(requests):
            requests[gone][1].cancel()
            await _settled()
    waiting = [task for _, task in requests if not task.done()]
    outcome = LoadOutcome("remote", load_ms=5.0)
    load.set_result(outcome) if loads else load.set_exception(ModelLoadError("corrupt"))
    ends = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(end == outcome if loads else isinstance(end, ModelLoadError) for end in ends)
    assert not waits._models and not waits._tenants  # every wait left the books


async def _wait(waits: LoadWaits, tenant: str, load: asyncio.Future[LoadOutcome]) -> LoadOutcome:
    """A request for the cold model waiting on `load`, as the invoke path waits."""
    with waits.waiting("cold", tenant) as waiter:
        return await waiter.until(asyncio.shield(load))


async def _settled() -> None:
    """Until the tasks woken so far have run: an arrival, then the request it pushed out."""
    for _ in range(3):
        await asyncio.sleep(0)
