"""Each tenant's request rate, held by a token bucket: a request past it is a 429 that says when."""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from modelhost.errors import RateLimited
from modelhost.scheduler import TenantLimits

PRUNE_AT_BUCKETS = 1024  # tenants with a bucket before the full ones are forgotten


class TokenBucket:
    """`rate_per_s` tokens a second, at most `burst` held, one taken by each request."""

    def __init__(self, rate_per_s: float, burst: int, now: float) -> None:
        self.rate_per_s, self.burst = rate_per_s, burst
        self.tokens, self.stamp = float(burst), now

    def take(self, now: float) -> float:
        """Take a token: 0 when there was one, else the seconds until there is."""
        self._refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate_per_s

    def retune(self, rate_per_s: float, burst: int, now: float) -> None:
        """Take a new rate and burst, keeping what is held up to the new burst."""
        self._refill(now)
        self.rate_per_s, self.burst = rate_per_s, burst
        self.tokens = min(self.tokens, burst)

    def full(self, now: float) -> bool:
        """Whether it holds its whole burst: forgetting it then changes nothing."""
        self._refill(now)
        return self.tokens >= self.burst

    def _refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate_per_s)
        self.stamp = now


def _wait(seconds: float) -> str:
    return f"{math.ceil(seconds * 1000)} ms" if seconds < 1 else f"{seconds:.2f} s"


class TenantRates:
    """A bucket for each tenant whose policy has a rate, retuned when its policy changes."""

    def __init__(
        self,
        policy_of: Callable[[str], TenantLimits],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy_of, self.clock = policy_of, clock
        self.buckets: dict[str, TokenBucket] = {}
        self._prune_at = PRUNE_AT_BUCKETS

    def take(self, tenant: str) -> None:
        """Let one of `tenant`'s requests through, or refuse it with RateLimited."""
        policy = self.policy_of(tenant)
        if not policy.rate:
            self.buckets.pop(tenant, None)
            return
        now = self.clock()
        wait_s = self._bucket(tenant, policy, now).take(now)
        if wait_s:
            raise RateLimited(
                f"tenant {tenant} sent more than its rate of {policy.rate:g} requests a second "
                f"(burst {policy.burst_requests}, the tenants file); retry after {_wait(wait_s)}, "
                "or raise its rate in the tenants file",
                retry_after_s=max(1, math.ceil(wait_s)),
            )

    def _bucket(self, tenant: str, policy: TenantLimits, now: float) -> TokenBucket:
        bucket = self.buckets.get(tenant)
        if bucket is None:
            if len(self.buckets) >= self._prune_at:
                self._prune(now)
            bucket = self.buckets[tenant] = TokenBucket(policy.rate, policy.burst_requests, now)
        elif (bucket.rate_per_s, bucket.burst) != (policy.rate, policy.burst_requests):
            bucket.retune(policy.rate, policy.burst_requests, now)
        return bucket

    def _prune(self, now: float) -> None:
        """Forget the full buckets, so many tenants seen once keep no memory."""
        self.buckets = {t: b for t, b in self.buckets.items() if not b.full(now)}
        self._prune_at = max(PRUNE_AT_BUCKETS, 2 * len(self.buckets))
