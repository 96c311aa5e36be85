"""The dispatcher resolves every job exactly once, whatever the workers do: answer, fail a whole
batch, or answer slowly; batches go only to free replicas and never exceed the batch size."""

from __future__ import annotations

import ast
import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import modelhost
from modelhost.errors import WorkerDied
from modelhost.scheduler.batcher import BatchQueue, Job
from modelhost.scheduler.dispatch import PRESSURE_RECHECK_S, Dispatcher, Ended, Start


class FakeWorker:
    def __init__(self, worker_id: int) -> None:
        self.worker_id, self.alive, self.pending = worker_id, True, {}


running: set[asyncio.Future[Any]] = set()  # a task nobody holds may be collected


def started(send: Callable[[Any, list[Job[int]]], Awaitable[float | None]]) -> Start:
    """The dispatcher's `start` of a fake worker written as a coroutine: run as a task, and the
    batch's end told as the dispatcher asks (seconds spent, or the error that ended it)."""

    def start(worker: Any, batch: list[Job[Any]], ended: Ended) -> None:
        task = asyncio.ensure_future(send(worker, batch))
        running.add(task)

        def done(task: asyncio.Future[float | None]) -> None:
            running.discard(task)
            error = task.exception()
            ended(0.0 if error else task.result() or 0.0, error)

        task.add_done_callback(done)

    return start


def answered_on(release: asyncio.Future[None]) -> Callable[[Any, list[Job[int]]], Awaitable[None]]:
    """A worker's `send` that answers each job of a batch with its request once `release` is set."""

    async def send(worker: Any, batch: list[Job[int]]) -> None:
        await release
        for job in batch:
            job.future.set_result(job.request)

    return send


@settings(max_examples=60, deadline=None)
@given(
    jobs=st.integers(1, 60),
    workers=st.integers(1, 3),
    slots=st.integers(1, 2),
    max_batch_size=st.integers(1, 8),
    seed=st.integers(0, 2**16),
)
def test_every_job_is_resolved_exactly_once(
    jobs: int, workers: int, slots: int, max_batch_size: int, seed: int
) -> None:
    rng = random.Random(seed)
    running: dict[int, int] = {}  # worker → batches running
    batches: list[list[int]] = []

    async def send(worker: Any, batch: list[Job[int]]) -> None:
        running[worker.worker_id] = running.get(worker.worker_id, 0) + 1
        assert running[worker.worker_id] <= slots  # only a free replica gets a batch
        batches.append([job.request for job in batch])
        await asyncio.sleep(rng.random() / 1000)
        running[worker.worker_id] -= 1
        if rng.random() < 0.2:
            raise WorkerDied("the worker died")
        for job in batch:
            job.future.set_result(job.request)

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        queue: BatchQueue[int] = BatchQueue("m", 1000, max_batch_size, 0.0, loop.time)
        dispatcher = Dispatcher(queue, started(send), lambda: None)
        for worker_id in range(workers):
            dispatcher.add(FakeWorker(worker_id), slots)  # type: ignore[arg-type]
        submitted = []
        for number in range(jobs):
            submitted.append(Job(number, loop.create_future(), loop.time()))
            dispatcher.submit(submitted[-1])
            if rng.random() < 0.3:
                await asyncio.sleep(0)
        return await asyncio.gather(*(j.future for j in submitted), return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert all(o == n or isinstance(o, WorkerDied) for n, o in enumerate(outcomes))
    assert sorted(n for batch in batches for n in batch) == list(range(jobs))  # each sent once
    assert all(len(batch) <= max_batch_size for batch in batches)


def test_pressure_without_free_replica() -> None:
    """Pressure is reported when ready jobs find no free replica."""
    pressed: list[bool] = []

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        release = loop.create_future()

        dispatcher = Dispatcher(
            BatchQueue("m", 10, 1, 0.0, loop.time),
            started(answered_on(release)),
            lambda: pressed.append(True),
        )
        dispatcher.add(FakeWorker(1), 1)  # type: ignore[arg-type]
        jobs = [Job(n, loop.create_future(), loop.time()) for n in range(2)]
        dispatcher.submit(jobs[0])
        assert pressed == []  # the one replica took it
        dispatcher.submit(jobs[1])
        assert pressed == [True]  # the second waits for a slot
        release.set_result(None)
        assert await asyncio.gather(*(j.future for j in jobs)) == [0, 1]

    asyncio.run(scenario())


def test_partial_batch_goes_after_the_delay() -> None:
    """A partial batch goes when its oldest job has waited the delay."""

    async def scenario() -> float:
        loop = asyncio.get_running_loop()
        sent_at: list[float] = []

        async def send(worker: Any, batch: list[Job[int]]) -> None:
            sent_at.append(loop.time())
            for job in batch:
                job.future.set_result(len(batch))

        dispatcher = Dispatcher(
            BatchQueue("m", 10, 8, 0.05, loop.time), started(send), lambda: None
        )
        dispatcher.add(FakeWorker(1), 1)  # type: ignore[arg-type]
        queued = Job(0, loop.create_future(), loop.time())
        dispatcher.submit(queued)
        assert await queued.future == 1
        return sent_at[0] - queued.enqueued_at

    assert asyncio.run(scenario()) >= 0.05


def test_busy_share_counts_own_work_only() -> None:
    """Busy share counts the worker's time, not a wait behind another model.

    A batch that waits in a worker busy loading another model is not this model's work (in
    the churn run such waits made lukewarm models look hot and load copies)."""
    now = [0.0]

    async def scenario() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        release = loop.create_future()

        async def send(worker: Any, batch: list[Job[int]]) -> float:
            await release
            for job in batch:
                job.future.set_result(0)
            return 0.1  # what the worker reports it spent

        worker = FakeWorker(1)
        queue: BatchQueue[int] = BatchQueue("m", 10, 1, 0.0, lambda: now[0])
        dispatcher = Dispatcher(queue, started(send), lambda: None)
        dispatcher.add(worker, 1)  # type: ignore[arg-type]
        now[0] = 0.5
        worker.pending[1] = (loop.create_future(), "other")  # another model's load there
        job = Job(0, loop.create_future(), now[0])
        dispatcher.submit(job)
        await asyncio.sleep(0)  # the batch is sent
        now[0] = 1.0
        behind_a_load = dispatcher.busy_share()
        del worker.pending[1]
        alone = dispatcher.busy_share()  # the same batch, now the worker's only work
        release.set_result(None)
        await job.future
        await asyncio.sleep(0)
        return behind_a_load, alone, dispatcher.busy_share()

    behind_a_load, alone, done = asyncio.run(scenario())
    assert behind_a_load == 0.0
    assert alone == 0.5  # running for the last 0.5 s of a 1 s window
    assert done == 0.1  # ended: the 0.1 s the worker reports, not the 0.5 s it took


def test_pressure_is_told_again_while_requests_keep_waiting() -> None:
    """A busy share read too early (the batch ahead had just begun) is not the last word: while
    requests wait for a slot the host hears of it again, and not once none waits (a hot model's
    scale-out was missed so, once, in CI)."""
    pressed: list[float] = []

    async def scenario() -> tuple[int, int, int]:
        loop = asyncio.get_running_loop()
        release = loop.create_future()

        queue: BatchQueue[int] = BatchQueue("m", 10, 1, 0.0, loop.time)
        dispatcher = Dispatcher(
            queue, started(answered_on(release)), lambda: pressed.append(loop.time())
        )
        dispatcher.add(FakeWorker(1), 1)  # type: ignore[arg-type]
        jobs = [Job(n, loop.create_future(), loop.time()) for n in range(2)]
        for job in jobs:
            dispatcher.submit(job)
        await asyncio.sleep(5 * PRESSURE_RECHECK_S)
        while_waiting = len(pressed)
        release.set_result(None)
        assert await asyncio.gather(*(j.future for j in jobs)) == [0, 1]
        answered = len(pressed)  # the second waits until the first's batch has ended
        await asyncio.sleep(3 * PRESSURE_RECHECK_S)
        return while_waiting, answered, len(pressed)

    while_waiting, answered, after = asyncio.run(scenario())
    assert while_waiting >= 3  # at once, then again while the second request waited
    assert after == answered  # and no more once none waits


def test_batch_delay_under_uvloop_answers_every_job() -> None:
    """With a batch delay, jobs arriving while their worker is busy are all answered under
    uvloop, whose `call_at` less than half a millisecond ahead returns a handle without
    `when()`."""
    uvloop = pytest.importorskip("uvloop")

    async def scenario() -> list[int]:
        loop = asyncio.get_running_loop()

        async def send(worker: Any, batch: list[Job[int]]) -> None:
            await asyncio.sleep(0.0005)
            for job in batch:
                job.future.set_result(job.request)

        queue: BatchQueue[int] = BatchQueue("m", 1000, 8, 0.0004, loop.time)  # < 0.5 ms
        dispatcher = Dispatcher(queue, started(send), lambda: None)
        dispatcher.add(FakeWorker(1), 1)  # type: ignore[arg-type]
        jobs = []
        for n in range(400):
            job = Job(n, loop.create_future(), loop.time())
            dispatcher.submit(job)
            jobs.append(job)
            if n % 3 == 0:
                await asyncio.sleep(0)
        return [await job.future for job in jobs]

    assert uvloop.run(scenario()) == list(range(400))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_each_idle_span_is_claimed_once() -> None:
    """A dispatcher unpressed for the idle time says so once, then starts a new span: the
    scaling drops one copy per span."""
    clock = Clock()
    dispatcher = Dispatcher(BatchQueue("m", 10, 1, 0.0, clock), lambda *_: None, lambda: None)
    assert not dispatcher.claim_idle_span(now=4.9, idle_s=5.0)
    assert dispatcher.claim_idle_span(now=5.0, idle_s=5.0)
    assert not dispatcher.claim_idle_span(now=9.9, idle_s=5.0)
    assert dispatcher.claim_idle_span(now=10.0, idle_s=5.0)


def test_only_the_dispatcher_sets_its_state() -> None:
    """What the dispatcher sets on itself, no other module sets: the others ask it."""
    package = Path(modelhost.__file__).parent
    home = package / "scheduler/dispatch.py"
    own = {
        node.attr
        for node in ast.walk(ast.parse(home.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, ast.Store)
        and ast.unparse(node.value) == "self"
    }
    found = [
        f"{path.relative_to(package)}:{node.lineno} sets {ast.unparse(node)}"
        for path in sorted(package.rglob("*.py"))
        if path != home
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Attribute)
        and isinstance(node.ctx, (ast.Store, ast.Del))
        and node.attr in own
        and ast.unparse(node.value) != "self"
    ]
    assert found == []


def test_busy_window_forgets_old_batches_unread() -> None:
    """A model at its copy limit never has its busy share read (scale-out asks the cheap
    question first), so the batches of its window are forgotten as they end, not only when read."""
    now = [0.0]

    async def scenario() -> int:
        loop = asyncio.get_running_loop()

        async def send(worker: Any, batch: list[Job[int]]) -> float:
            for job in batch:
                job.future.set_result(0)
            return 0.001

        queue: BatchQueue[int] = BatchQueue("m", 10, 1, 0.0, lambda: now[0])
        dispatcher = Dispatcher(queue, started(send), lambda: None)
        dispatcher.add(FakeWorker(1), 1)  # type: ignore[arg-type]
        for _ in range(200):
            now[0] += 0.1
            job = Job(0, loop.create_future(), now[0])
            dispatcher.submit(job)
            await job.future
            await asyncio.sleep(0)  # the batch's end is told
        return len(dispatcher._batches)  # what the window holds, read without busy_share

    assert asyncio.run(scenario()) <= 11  # a second's worth at 0.1 s a batch
