"""Fair admission on the invoke path, against a fake pool: with tenants on, requests past
max_concurrency wait in their tenant's queue, and a freed slot goes to the tenant whose turn it
is, so a noisy tenant's backlog does not hold up a quiet tenant's request."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import invariant, rule

from host.fakes import FakePool, host_with
from host.machine import Interleavings, runs_of_30_steps
from modelhost.errors import TenantQueueFull
from modelhost.host import Invocation, ModelHost
from modelhost.host.queues import Queues
from modelhost.scheduler import SchedulerSettings
from modelhost.scheduler.batcher import BatchQueue, FairBatchQueue
from modelhost.workers.messages import Infer

NOISY_MODELS = [f"noisy-{i}" for i in range(10)]
LIMIT = 2
MAX_ROUNDS = 500  # of answering calls: far more than any scenario here needs
FAIR = SchedulerSettings(fair_tenants=True, max_concurrency=LIMIT, response_timeout_s=60.0)


def of(tenant: str) -> Invocation:
    return Invocation(b"[1]", "application/json", "", tenant=tenant)


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


async def answer_until(pool: FakePool, task: asyncio.Future[object]) -> list[str]:
    """Answer calls in the order made, as a worker serves its pipe, until `task` is done; the
    model of each request answered on the way."""
    answered: list[str] = []
    for _ in range(MAX_ROUNDS):
        await settle()
        if task.done():
            return answered
        if pool.calls:
            call = pool.calls[0]
            if isinstance(call.request, Infer):
                answered += [call.request.model] * len(call.request.items)
            pool.answer(call)
    raise AssertionError(f"not done after {MAX_ROUNDS} rounds; calls waiting: {pool.calls}")


async def warm(host: ModelHost, pool: FakePool, names: list[str]) -> None:
    for name in names:
        await answer_until(pool, asyncio.ensure_future(host.invoke(name, of("warm"))))


def noisy_requests_ahead_of_quiet(tmp_path: Path, scheduling: SchedulerSettings) -> int:
    """One worker; the noisy tenant sends 30 requests over its ten models, then the quiet
    tenant one to its own: how many noisy requests the worker answers before the quiet one."""
    pool = FakePool(1)
    host = host_with(pool, tmp_path, {}, scheduling=scheduling)

    async def scenario() -> int:
        await warm(host, pool, [*NOISY_MODELS, "quiet"])
        noisy = [
            asyncio.ensure_future(host.invoke(NOISY_MODELS[i % 10], of("noisy"))) for i in range(30)
        ]
        await settle()
        quiet = asyncio.ensure_future(host.invoke("quiet", of("quiet")))
        ahead = await answer_until(pool, quiet)
        await answer_until(pool, asyncio.gather(*noisy))
        assert all(task.result().body == b"ok" for task in noisy)
        return sum(model != "quiet" for model in ahead)

    return asyncio.run(scenario())


def test_noisy_backlog_does_not_delay_a_quiet_tenant(tmp_path: Path) -> None:
    """Tenants on: the quiet request waits for the requests in flight when it came and at most
    one more of the noisy tenant's. Off, it waits behind a batch of each noisy model."""
    assert noisy_requests_ahead_of_quiet(tmp_path, FAIR) <= LIMIT + 1
    first_come = SchedulerSettings(response_timeout_s=60.0)
    assert noisy_requests_ahead_of_quiet(tmp_path, first_come) >= len(NOISY_MODELS)


def test_full_tenant_queue_refuses_only_that_tenant(tmp_path: Path) -> None:
    """The tenant's queue (job_queue_size) full: its next request is refused at once, naming
    the tenant; another tenant's request waits for its turn."""
    pool = FakePool(1)
    scheduling = SchedulerSettings(fair_tenants=True, max_concurrency=1, job_queue_size=1)
    host = host_with(pool, tmp_path, {}, scheduling=scheduling)

    async def scenario() -> None:
        await warm(host, pool, ["m"])
        running = asyncio.ensure_future(host.invoke("m", of("noisy")))
        waiting = asyncio.ensure_future(host.invoke("m", of("noisy")))
        await settle()
        with pytest.raises(TenantQueueFull, match="tenant noisy has 1 requests waiting"):
            await host.invoke("m", of("noisy"))
        other = asyncio.ensure_future(host.invoke("m", of("quiet")))
        await answer_until(pool, asyncio.gather(running, waiting, other))

    asyncio.run(scenario())


def test_a_request_that_leaves_the_queue_frees_its_place(tmp_path: Path) -> None:
    """A waiting request cancelled (its client gone) leaves its tenant's queue, and the slot
    goes on to the next in line; nothing stays counted in flight."""
    pool = FakePool(1)
    scheduling = SchedulerSettings(fair_tenants=True, max_concurrency=1)
    host = host_with(pool, tmp_path, {}, scheduling=scheduling)
    fair = host.invoke_path.fair
    assert fair is not None

    async def scenario() -> None:
        await warm(host, pool, ["m"])
        running = asyncio.ensure_future(host.invoke("m", of("a")))
        gone = asyncio.ensure_future(host.invoke("m", of("a")))
        after = asyncio.ensure_future(host.invoke("m", of("b")))
        await settle()
        gone.cancel()
        await answer_until(pool, asyncio.gather(running, after))
        assert gone.cancelled()

    asyncio.run(scenario())
    assert fair.queue.in_flight == 0 and len(fair.queue) == 0


def test_tenants_off_keeps_the_server_wide_429(tmp_path: Path) -> None:
    """With tenants off, the host has no fair queue: max_concurrency answers as before."""
    host = host_with(FakePool(1), tmp_path, {}, scheduling=SchedulerSettings(max_concurrency=1))
    assert host.invoke_path.fair is None


class FairInterleavings(Interleavings):
    """The host's machine with tenants on: two slots, two places a tenant."""

    scheduling = SchedulerSettings(
        response_timeout_s=1e9,
        scale_in_idle_s=5.0,
        fair_tenants=True,
        max_concurrency=LIMIT,
        job_queue_size=2,
    )

    @rule(name=st.sampled_from(["a", "b"]), tenant=st.sampled_from(["t1", "t2", "t3"]))
    def tenant_request(self, name: str, tenant: str) -> None:
        self.start(self.host.invoke(name, of(tenant)), self.requests)

    @invariant()
    def slots_within_the_limit(self) -> None:
        fair = self.host.invoke_path.fair
        assert fair is not None
        queue = fair.queue
        assert 0 <= queue.in_flight <= LIMIT
        assert not (len(queue) and queue.in_flight < LIMIT), "a slot idles while one waits"


FairInterleavings.TestCase.settings = runs_of_30_steps(100)
TestFairAdmissionUnderAnyInterleaving = FairInterleavings.TestCase


def test_a_models_queue_is_fair_only_where_tenants_share_models(tmp_path: Path) -> None:
    """Tenants read from names give each model one tenant: its requests queue in arrival
    order, without the fair batch queue's bookkeeping."""
    host = host_with(FakePool(1), tmp_path, {}, scheduling=FAIR)
    queues = (
        Queues(host.queues.pool, host.manifests, FAIR, time.monotonic, print, models_shared=shared)
        for shared in (True, False)
    )
    shared_queue, own_queue = (queues.dispatcher("t/a/m.joblib", True).queue for queues in queues)
    assert isinstance(shared_queue, FairBatchQueue)
    assert type(own_queue) is BatchQueue
