"""Requests waiting for loads are bounded by model and by tenant, and told when to come back."""

from __future__ import annotations

import contextlib

import pytest

from modelhost.errors import QueueFull, TenantQueueFull
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
