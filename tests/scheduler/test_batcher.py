"""The batcher's properties: a batch never exceeds max_batch_size, jobs leave in the order they
came and exactly once, a job waits for company at most max_batch_delay_s once a worker is free,
and the queue refuses exactly the job over its capacity."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.errors import QueueFull
from modelhost.scheduler.batcher import BatchQueue, Job


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def job(number: int, clock: Clock, loop: asyncio.AbstractEventLoop) -> Job[int]:
    return Job(number, loop.create_future(), clock())


# one step of the simulation: (milliseconds that pass, jobs that arrive, is a worker free?)
steps = st.lists(
    st.tuples(st.integers(0, 20), st.integers(0, 6), st.booleans()), min_size=1, max_size=60
)


@settings(max_examples=200, deadline=None)
@given(steps=steps, max_batch_size=st.integers(1, 8), delay_ms=st.integers(0, 30))
def test_batches_are_bounded_ordered_complete_and_never_late(
    steps: list[tuple[int, int, bool]], max_batch_size: int, delay_ms: int
) -> None:
    clock, loop = Clock(), asyncio.new_event_loop()
    queue: BatchQueue[int] = BatchQueue("m", 10_000, max_batch_size, delay_ms / 1000, clock)
    arrived, taken = 0, []
    for elapsed_ms, arrivals, worker_free in [*steps, (delay_ms + 1, 0, True)]:
        clock.now += elapsed_ms / 1000
        for _ in range(arrivals):
            queue.put(job(arrived, clock, loop))
            arrived += 1
        while worker_free and queue.ready():  # a free worker takes every ready batch
            batch = queue.take()
            assert 1 <= len(batch) <= max_batch_size
            taken += batch
            # a partial batch leaves only once its oldest job has waited the delay
            if len(batch) < max_batch_size:
                assert clock.now - batch[0].enqueued_at >= delay_ms / 1000 - 1e-9
        # a job still waiting with a free worker has not yet waited the delay
        if worker_free and len(queue):
            oldest = clock.now - (queue.due_at() or 0) + delay_ms / 1000
            assert oldest < delay_ms / 1000 + 1e-9
    while queue.ready():  # the last step let every remaining job come due
        taken += queue.take()
    loop.close()
    assert [j.request for j in taken] == list(range(arrived))  # in order, each exactly once
    assert len(queue) == 0


def test_without_a_delay_a_free_worker_takes_whatever_waits() -> None:
    clock, loop = Clock(), asyncio.new_event_loop()
    queue: BatchQueue[int] = BatchQueue("m", 10, 8, 0.0, clock)
    assert not queue.ready()
    queue.put(job(0, clock, loop))
    assert queue.ready() and [j.request for j in queue.take()] == [0]
    loop.close()


def test_the_queue_refuses_exactly_the_job_over_its_capacity() -> None:
    clock, loop = Clock(), asyncio.new_event_loop()
    queue: BatchQueue[int] = BatchQueue("tenant/a", 3, 1, 0.0, clock)
    for number in range(3):
        queue.put(job(number, clock, loop))
    with pytest.raises(QueueFull, match="model tenant/a has 3 requests queued.*is 3"):
        queue.put(job(3, clock, loop))
    queue.take()
    queue.put(job(4, clock, loop))  # room again
    assert len(queue) == 3
    loop.close()


def test_discarded_job_keeps_the_order() -> None:
    """A discarded job leaves the queue and the rest keep their order."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue: BatchQueue[int] = BatchQueue("m", 10, 10, 0.0, clock)
    jobs = [job(number, clock, loop) for number in range(4)]
    for queued in jobs:
        queue.put(queued)
    queue.discard(jobs[1])
    queue.discard(jobs[1])  # twice is harmless
    assert [j.request for j in queue.take()] == [0, 2, 3]
    loop.close()


def test_solo_job_goes_alone() -> None:
    """A solo job leaves in a batch of its own.

    A retried request goes alone: if its worker dies again, no other request shares the
    blame (or the second death)."""
    clock, loop = Clock(), asyncio.new_event_loop()
    queue: BatchQueue[int] = BatchQueue("m", 10, 8, 0.0, clock)
    for number in range(5):
        queued = job(number, clock, loop)
        queued.solo = number == 2
        queue.put(queued)
    batches = []
    while queue.ready():
        batches.append([j.request for j in queue.take()])
    assert batches == [[0, 1], [2], [3, 4]]
    loop.close()
