"""A worker's turns go to the tenants in fair order across the models it holds."""

from __future__ import annotations

import asyncio
import random
from typing import Any, NamedTuple

from hypothesis import given, settings
from hypothesis import strategies as st
from test_dispatch import FakeWorker, started

from modelhost.errors import WorkerDied
from modelhost.scheduler.batcher import BatchQueue, Job
from modelhost.scheduler.dispatch import Dispatcher, Ended
from modelhost.scheduler.turns import TURNS_PER_SLOT, Turns


class Request(NamedTuple):
    tenant: str
    n: int


class Worker:
    """One fake worker: batches start in order, and end when the test says."""

    def __init__(self) -> None:
        self.handle = FakeWorker(1)
        self.started: list[Request] = []
        self.running: list[tuple[list[Job[Request]], Ended]] = []

    def start(self, worker: Any, batch: list[Job[Request]], ended: Ended) -> None:
        self.started.extend(job.request for job in batch)
        self.running.append((batch, ended))

    def end_oldest(self) -> None:
        batch, ended = self.running.pop(0)
        for job in batch:
            job.future.set_result(job.request)
        ended(0.001, None)


def model(name: str, worker: Worker, turns: Turns | None, loop: Any) -> Dispatcher:
    dispatcher = Dispatcher(
        BatchQueue(name, 100, 1, 0.0, loop.time), worker.start, lambda: None, 1, turns
    )
    dispatcher.add(worker.handle, 1)  # type: ignore[arg-type]
    return dispatcher


def tenant_of(job: Job[Request]) -> str:
    return job.request.tenant


def quiet_position(noisy_models: int, fair: bool) -> int:
    """Where a quiet tenant's one request starts, sent after one each to a noisy tenant's models."""

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        worker, turns = Worker(), Turns(1, tenant_of) if fair else None
        for n in range(noisy_models):
            noisy = model(f"noisy-{n}", worker, turns, loop)
            noisy.submit(Job(Request("noisy", n), loop.create_future(), loop.time()))
        quiet = model("quiet", worker, turns, loop)
        quiet.submit(Job(Request("quiet", 0), loop.create_future(), loop.time()))
        while worker.running:
            worker.end_oldest()
        assert len(worker.started) == noisy_models + 1
        return [r.tenant for r in worker.started].index("quiet")

    return asyncio.run(scenario())


def test_a_quiet_tenant_waits_behind_few_of_a_noisy_tenants_models() -> None:
    """First come, first served, it waits behind every noisy model's batch in the pipe."""
    assert quiet_position(10, fair=False) == 10
    assert quiet_position(10, fair=True) <= TURNS_PER_SLOT + 1


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=40), st.integers(1, 3))
def test_every_request_starts_once_and_turns_never_exceed_the_limit(
    tenants: list[str], slots: int
) -> None:
    """Whatever the mix, each request starts exactly once and the worker holds at most its
    turns of batches at a time."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        worker, turns = Worker(), Turns(slots, tenant_of)
        models = {t: model(t, worker, turns, loop) for t in "abc"}
        for extra in models.values():
            extra.replicas[1].slots = slots
        for n, tenant in enumerate(tenants):
            models[tenant].submit(Job(Request(tenant, n), loop.create_future(), loop.time()))
            assert len(worker.running) <= slots * TURNS_PER_SLOT
        while worker.running:
            worker.end_oldest()
            assert len(worker.running) <= slots * TURNS_PER_SLOT
        assert sorted(r.n for r in worker.started) == list(range(len(tenants)))

    asyncio.run(scenario())


@settings(max_examples=40, deadline=None)
@given(
    jobs=st.lists(st.integers(0, 2), min_size=1, max_size=50),
    placements=st.lists(st.sets(st.integers(0, 2), min_size=1), min_size=3, max_size=3),
    seed=st.integers(0, 2**16),
)
def test_models_across_workers_that_die_resolve_every_job_once(
    jobs: list[int], placements: list[set[int]], seed: int
) -> None:
    """Three tenants' models on overlapping workers, batches that take random time or die with
    their worker: each job is answered or failed exactly once, and no worker ever holds more
    than its turns."""
    rng = random.Random(seed)
    running: dict[int, int] = {}

    async def send(worker: Any, batch: list[Job[Request]]) -> None:
        running[worker.worker_id] = running.get(worker.worker_id, 0) + 1
        assert running[worker.worker_id] <= TURNS_PER_SLOT
        await asyncio.sleep(rng.random() / 1000)
        running[worker.worker_id] -= 1
        if rng.random() < 0.2:
            raise WorkerDied("the worker died")
        for job in batch:
            job.future.set_result(job.request)

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        turns, workers = Turns(1, tenant_of), [FakeWorker(n) for n in range(3)]
        models = []
        for tenant, placement in zip("abc", placements, strict=True):
            queue: BatchQueue[Request] = BatchQueue(tenant, 1000, 2, 0.0, loop.time)
            models.append(Dispatcher(queue, started(send), lambda: None, 1, turns))
            for n in placement:
                models[-1].add(workers[n], 1)  # type: ignore[arg-type]
        submitted = []
        for n, m in enumerate(jobs):
            submitted.append(Job(Request("abc"[m], n), loop.create_future(), loop.time()))
            models[m].submit(submitted[-1])
            if rng.random() < 0.3:
                await asyncio.sleep(0)
        return await asyncio.gather(*(j.future for j in submitted), return_exceptions=True)

    outcomes = asyncio.run(scenario())
    assert all(
        o == Request("abc"[m], n) or isinstance(o, WorkerDied)
        for n, (m, o) in enumerate(zip(jobs, outcomes, strict=True))
    )


def test_turns_follow_the_tenants_weights() -> None:
    """Two tenants backlogged on one worker, four models each, weighted 1:3, get its turns
    1:3 (first come, first served, each model would get an equal share)."""

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        weights = {"light": 1.0, "heavy": 3.0}
        worker, turns = Worker(), Turns(1, tenant_of, weights.__getitem__)
        for tenant in weights:
            for m in range(4):
                dispatcher = model(f"{tenant}-{m}", worker, turns, loop)
                for n in range(20):
                    dispatcher.submit(Job(Request(tenant, n), loop.create_future(), loop.time()))
        while len(worker.started) < 42:
            worker.end_oldest()
        return [r.tenant for r in worker.started[2:42]]  # past the turns taken at once

    served = asyncio.run(scenario())
    assert abs(served.count("heavy") - 3 * served.count("light")) <= 4


def test_a_model_just_served_competes_for_the_turn_it_freed() -> None:
    """Three tenants of one model each on one worker, the one weighted 4 ahead of two weighted
    1: the turn a batch frees goes by the weights, its own model among the candidates, so the
    heavy tenant is served more than a third of the turns (handed to the others, it got a third)."""

    async def scenario() -> list[str]:
        loop = asyncio.get_running_loop()
        weights = {"a": 1.0, "b": 1.0, "heavy": 4.0}
        worker, turns = Worker(), Turns(1, tenant_of, weights.__getitem__)
        for tenant in weights:
            dispatcher = model(tenant, worker, turns, loop)
            for n in range(60):
                dispatcher.submit(Job(Request(tenant, n), loop.create_future(), loop.time()))
        while len(worker.started) < 62:
            worker.end_oldest()
        return [r.tenant for r in worker.started[2:62]]

    served = asyncio.run(scenario())
    assert served.count("heavy") >= 25
