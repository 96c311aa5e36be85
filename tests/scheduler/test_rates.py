"""The token bucket and each tenant's rate, on a clock the test moves."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelhost.config.tenant_policies import TenantPolicies, TenantPolicy
from modelhost.errors import RateLimited
from modelhost.protocols.status import status_of
from modelhost.scheduler.rates import PRUNE_AT_BUCKETS, TenantRates, TokenBucket


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_bucket_lets_its_burst_through_then_says_when() -> None:
    bucket = TokenBucket(2.0, 3, now=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.5)
    assert bucket.take(0.25) == pytest.approx(0.25)
    assert bucket.take(0.5) == 0.0


def test_a_bucket_never_holds_more_than_its_burst() -> None:
    bucket = TokenBucket(10.0, 2, now=0.0)
    assert bucket.full(1000.0)
    assert [bucket.take(1000.0) for _ in range(3)][2] > 0


@settings(max_examples=100, deadline=None)
@given(
    st.floats(0.5, 50.0),
    st.integers(1, 20),
    st.lists(st.floats(0.0, 2.0), min_size=1, max_size=200),
)
def test_requests_let_through_never_pass_burst_plus_rate_times_time(
    rate: float, burst: int, gaps_s: list[float]
) -> None:
    """Over any run of arrivals, what gets through is at most the burst and what the rate
    refilled since the first."""
    bucket, now, passed = TokenBucket(rate, burst, now=0.0), 0.0, 0
    for gap_s in gaps_s:
        now += gap_s
        passed += bucket.take(now) == 0.0
        assert passed <= burst + rate * now + 1e-6


def test_a_tenant_past_its_rate_is_429_with_whole_seconds_to_wait() -> None:
    clock = Clock()
    policies = TenantPolicies(named={"t007": TenantPolicy(rate=0.25, burst=2)})
    rates = TenantRates(policies.of, clock)
    rates.take("t007")
    rates.take("t007")
    with pytest.raises(RateLimited, match="tenant t007 sent more than its rate of 0.25") as late:
        rates.take("t007")
    assert late.value.retry_after_s == 4 and status_of(late.value) == 429
    clock.now += 3.5
    with pytest.raises(RateLimited) as sooner:
        rates.take("t007")
    assert sooner.value.retry_after_s == 1
    clock.now += 0.5
    rates.take("t007")


def test_a_short_wait_is_said_in_milliseconds() -> None:
    """At 500 requests a second the wait is 2 ms, which the message must not round to 0 s."""
    rates = TenantRates(TenantPolicies(TenantPolicy(rate=500, burst=1)).of, Clock())
    rates.take("t007")
    with pytest.raises(RateLimited, match="retry after 2 ms") as refused:
        rates.take("t007")
    assert refused.value.retry_after_s == 1


def test_a_tenant_without_a_rate_is_never_limited_and_keeps_no_bucket() -> None:
    rates = TenantRates(TenantPolicies(named={"a": TenantPolicy(rate=1)}).of, Clock())
    for _ in range(100):
        rates.take("b")
    assert rates.buckets == {}


def test_a_new_policy_retunes_the_bucket() -> None:
    """A lower rate takes effect on the next request, without a fresh burst."""
    clock = Clock()
    current = TenantPolicies(TenantPolicy(rate=100, burst=100))
    rates = TenantRates(lambda tenant: current.of(tenant), clock)
    rates.take("a")
    current = TenantPolicies(TenantPolicy(rate=1, burst=1))
    rates.take("a")
    with pytest.raises(RateLimited):
        rates.take("a")
    current = TenantPolicies()
    rates.take("a")
    assert rates.buckets == {}


def test_full_buckets_of_many_tenants_are_forgotten() -> None:
    clock = Clock()
    rates = TenantRates(TenantPolicies(TenantPolicy(rate=1, burst=5)).of, clock)
    for n in range(PRUNE_AT_BUCKETS):
        rates.take(f"t{n}")
    clock.now += 10  # every bucket has refilled
    rates.take("another")
    assert list(rates.buckets) == ["another"]
