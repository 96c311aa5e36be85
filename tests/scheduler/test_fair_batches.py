"""A shared model's queue with tenants on: batches cut in fair order across the tenants, each
tenant's requests still in the order they came, every job out exactly once, and a batch due
when its oldest waiting job has waited the delay."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.errors import QueueFull
from modelhost.scheduler.batcher import FairBatchQueue, Job


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def tenant_of(job: Job[tuple[str, int]]) -> str:
    return job.request[0]


def fair_queue(
    clock: Clock, batch_size: int = 1, delay_s: float = 0.0, weights: dict[str, float] | None = None
) -> FairBatchQueue[tuple[str, int]]:
    weight = None if weights is None else weights.__getitem__
    return FairBatchQueue("shared", 10_000, batch_size, delay_s, clock, tenant_of, weight)


def put(
    queue: FairBatchQueue[tuple[str, int]],
    tenant: str,
    count: int,
    loop: asyncio.AbstractEventLoop,
    clock: Clock,
) -> None:
    for number in range(count):
        queue.put(Job((tenant, number), loop.create_future(), clock()))


def tenants_in_order(queue: FairBatchQueue[tuple[str, int]], takes: int) -> list[str]:
    return [job.request[0] for _ in range(takes) for job in queue.take()]


def test_backlogged_tenants_take_turns_whatever_their_numbers() -> None:
    """First come, first served, a's twelve would all go before b's six and c's two."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = fair_queue(clock)
    for tenant, count in (("a", 12), ("b", 6), ("c", 2)):
        put(queue, tenant, count, loop, clock)
    assert Counter(tenants_in_order(queue, 6)) == {"a": 2, "b": 2, "c": 2}
    loop.close()


def test_a_quiet_tenant_goes_in_the_next_batch() -> None:
    """Arriving behind a backlog, its one request is lifted level and has fewer waiting."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = fair_queue(clock)
    put(queue, "noisy", 20, loop, clock)
    tenants_in_order(queue, 5)
    put(queue, "quiet", 1, loop, clock)
    assert tenants_in_order(queue, 1) == ["quiet"]
    loop.close()


def test_weights_give_shares() -> None:
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = fair_queue(clock, weights={"light": 1.0, "heavy": 2.0})
    put(queue, "light", 50, loop, clock)
    put(queue, "heavy", 50, loop, clock)
    shares = Counter(tenants_in_order(queue, 30))
    assert abs(shares["heavy"] - 20) <= 1 and abs(shares["light"] - 10) <= 1
    loop.close()


# one step: (milliseconds that pass, arrivals by tenant, discard the n-th waiting job or not,
# is a worker free?)
steps = st.lists(
    st.tuples(
        st.integers(0, 20),
        st.lists(st.sampled_from("abc"), max_size=5),
        st.one_of(st.none(), st.integers(0, 10)),
        st.booleans(),
    ),
    min_size=1,
    max_size=50,
)


@settings(max_examples=200, deadline=None)
@given(steps=steps, batch_size=st.integers(1, 6), delay_ms=st.integers(0, 30))
def test_every_job_leaves_once_in_its_tenants_order_and_never_late(
    steps: list[tuple[int, list[str], int | None, bool]], batch_size: int, delay_ms: int
) -> None:
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = fair_queue(clock, batch_size, delay_ms / 1000)
    waiting: list[Job[tuple[str, int]]] = []
    out: list[Job[tuple[str, int]]] = []
    sent: Counter[str] = Counter()
    for elapsed_ms, arrivals, discard, worker_free in [*steps, (delay_ms + 1, [], None, True)]:
        clock.now += elapsed_ms / 1000
        for tenant in arrivals:
            waiting.append(Job((tenant, sent[tenant]), loop.create_future(), clock()))
            queue.put(waiting[-1])
            sent[tenant] += 1
        if discard is not None and discard < len(waiting):
            queue.discard(waiting.pop(discard))
        while worker_free and queue.ready():
            batch = queue.take()
            assert 1 <= len(batch) <= batch_size
            if len(batch) < batch_size:  # partial: its oldest waiter had waited the delay
                oldest = min(job.enqueued_at for job in waiting)
                assert clock.now - oldest >= delay_ms / 1000 - 1e-9
            for job in batch:
                waiting.remove(job)
            out += batch
        assert len(queue) == len(waiting)
        if waiting:
            assert queue.due_at() == min(job.enqueued_at for job in waiting) + delay_ms / 1000
    out += queue.take_all()  # nothing: the last step let every job come due
    loop.close()
    assert not waiting and len(queue) == 0
    for tenant in "abc":
        numbers = [job.request[1] for job in out if job.request[0] == tenant]
        assert numbers == sorted(set(numbers))  # its own order, each once


def test_a_full_queue_makes_room_from_the_tenant_holding_the_most() -> None:
    """A quiet tenant is not refused for a noisy one's backlog: the noisy tenant's newest
    request gives up its place, and only the noisy tenant is refused while it holds the most."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = FairBatchQueue("shared", 4, 1, 0.0, clock, tenant_of)
    noisy = [Job(("noisy", number), loop.create_future(), clock()) for number in range(4)]
    for job in noisy:
        queue.put(job)
    queue.put(Job(("quiet", 0), loop.create_future(), clock()))
    assert len(queue) == 4
    pushed_out = noisy[-1].future.exception()
    assert isinstance(pushed_out, QueueFull) and "tenant noisy holds 4" in str(pushed_out)
    with pytest.raises(QueueFull, match="tenant noisy holds 3"):
        queue.put(Job(("noisy", 4), loop.create_future(), clock()))
    assert tenants_in_order(queue, 1) == ["quiet"]
    loop.close()


# one step: arrivals by tenant, then batches taken
full_steps = st.lists(
    st.tuples(st.lists(st.sampled_from("abc"), max_size=6), st.integers(0, 3)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(steps=full_steps, capacity=st.integers(1, 6))
def test_a_full_queue_refuses_only_the_tenant_holding_the_most_of_it(
    steps: list[tuple[list[str], int]], capacity: int
) -> None:
    """Longest queue drop: the queue never holds more than its capacity, and a request is
    refused, or gives up its place, only if its tenant holds no fewer than any other."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = FairBatchQueue("shared", capacity, 2, 0.0, clock, tenant_of)
    waiting: list[Job[tuple[str, int]]] = []
    sent: Counter[str] = Counter()
    for arrivals, takes in steps:
        for tenant in arrivals:
            job = Job((tenant, sent[tenant]), loop.create_future(), clock())
            sent[tenant] += 1
            held = Counter(tenant_of(old) for old in waiting)
            try:
                queue.put(job)
            except QueueFull:
                assert len(waiting) == capacity and held[tenant] == max(held.values())
                continue
            waiting.append(job)
            for out in [old for old in waiting if old.future.done()]:
                loser = tenant_of(out)
                assert held[loser] > held[tenant] and held[loser] == max(held.values())
                assert out is [old for old in waiting if tenant_of(old) == loser][-1]
                waiting.remove(out)
            assert len(queue) == len(waiting) <= capacity
        for _ in range(takes):
            for job in queue.take():
                waiting.remove(job)
    loop.close()


def test_what_fits_in_one_batch_goes_in_it_in_the_order_it_came() -> None:
    """Two tenants' requests that one batch holds need no order but their own; more than a
    batch is cut in fair order."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue = fair_queue(clock, batch_size=4)
    for tenant in "aba":
        put(queue, tenant, 1, loop, clock)
    assert tenants_in_order(queue, 1) == ["a", "b", "a"]
    put(queue, "a", 5, loop, clock)
    put(queue, "b", 1, loop, clock)
    assert Counter(tenants_in_order(queue, 1)) == {"a": 3, "b": 1}  # age order: four a
    loop.close()
