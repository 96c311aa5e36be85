"""How fast one address may open connections to a gRPC port: a token bucket for each.

Else a client reconnecting after every GOAWAY makes each guard limit a millisecond's pause,
each connection's setup costing the frontend's event loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable

MAX_ADDRESSES = 4096  # buckets kept; a full bucket is forgotten first, as it says nothing


class ConnectionRate:
    """`burst` connections from an address at once, then `per_s` a second; none at once after
    a connection of the address broke a limit."""

    def __init__(
        self,
        per_s: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        max_addresses: int = MAX_ADDRESSES,
    ) -> None:
        self.per_s, self.burst, self.clock = per_s, burst, clock
        self.max_addresses = max_addresses
        self.buckets: dict[str, tuple[float, float]] = {}  # address → tokens, as of when

    def allow(self, address: str) -> bool:
        """Takes a token of `address`'s bucket; False when it has none."""
        now = self.clock()
        tokens = self.tokens(address, now)
        if len(self.buckets) >= self.max_addresses and address not in self.buckets:
            self.forget(now)
        allowed = tokens >= 1.0
        self.buckets.pop(address, None)  # to the end: the dict's order is last use
        self.buckets[address] = (tokens - 1.0 if allowed else tokens, now)
        return allowed

    def penalise(self, address: str) -> None:
        """`address` broke a limit: its next connections wait for the bucket to refill."""
        self.buckets.pop(address, None)
        self.buckets[address] = (0.0, self.clock())

    def tokens(self, address: str, now: float) -> float:
        tokens, then = self.buckets.get(address, (float(self.burst), now))
        return min(float(self.burst), tokens + (now - then) * self.per_s)

    def forget(self, now: float) -> None:
        """The buckets that refilled; the least used half too if that is not room enough."""
        full = [address for address in self.buckets if self.tokens(address, now) >= self.burst]
        for address in full:
            del self.buckets[address]
        if len(self.buckets) >= self.max_addresses:
            for address in list(self.buckets)[: self.max_addresses // 2]:
                del self.buckets[address]
