"""A fleet replayed: each request goes to the instance nginx's consistent hash picks.

Each instance's requests then go through the server's memory tier at its own budget.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from modelhost.cache.policy import policy_named
from modelhost.toolkit.simulate.replay import replay
from modelhost.toolkit.simulate.ring import Ring
from modelhost.toolkit.simulate.trace import Trace

SERVER_NAMES = "modelhost-{i}:8080"  # as the example modelhost-servers.conf


@dataclass(frozen=True)
class FleetRun:
    """One fleet size replayed; per-instance lists are in the servers' order."""

    servers: list[str]
    budget_bytes: int
    requests: list[int]
    loads: list[int]  # misses

    @property
    def instances(self) -> int:
        return len(self.servers)

    @property
    def hit_ratio(self) -> float:
        total = sum(self.requests)
        return (total - sum(self.loads)) / total if total else 0.0

    @property
    def request_shares(self) -> list[float]:
        return _shares(self.requests)

    @property
    def load_shares(self) -> list[float]:
        return _shares(self.loads)

    @property
    def imbalance(self) -> float:
        """The busiest instance's requests over the mean."""
        return max(self.request_shares) * self.instances

    def cost_per_million(self, price_per_hour: float, throughput_rps: float) -> float:
        """Every instance paid for, at the rate where the hottest one saturates."""
        fleet_rps = throughput_rps / max(self.request_shares)
        return self.instances * price_per_hour / (fleet_rps * 3600) * 1e6


def _shares(counts: Sequence[int]) -> list[float]:
    total = sum(counts)
    return [c / total if total else 0.0 for c in counts]


def server_names(instances: int, template: str = SERVER_NAMES) -> list[str]:
    return [template.format(i=i) for i in range(instances)]


def routed(
    trace: Trace, ring: Ring, spread: Mapping[str, int] | None = None, seed: int = 0
) -> list[str]:
    """The server of each request; a model in `spread` takes a random suffix, as nginx's does."""
    spread = spread or {}
    pick = random.Random(seed)
    keys = [m + (f"#{pick.randrange(spread[m])}" if m in spread else "") for m in trace.models]
    chosen = {key: ring.server_for(key) for key in set(keys)}
    return [_required(chosen[key], key) for key in keys]


def _required(server: str | None, key: str) -> str:
    if server is None:
        raise ValueError(f"no server on the ring for {key!r}")
    return server


def replay_fleet(
    trace: Trace,
    servers: Sequence[str],
    budget_bytes: int,
    policy: str = "lru",
    spread: Mapping[str, int] | None = None,
    seed: int = 0,
) -> FleetRun:
    """Each instance replays its own requests through the server's memory tier."""
    owners = routed(trace, Ring(servers), spread, seed)
    requests, loads = [], []
    for server in servers:
        part = instance_trace(trace, [p for p, owner in enumerate(owners) if owner == server])
        hits = replay(part, budget_bytes, policy_named(policy)) if part.models else 0
        requests.append(len(part.models))
        loads.append(len(part.models) - hits)
    return FleetRun(list(servers), budget_bytes, requests, loads)


def instance_trace(trace: Trace, positions: Sequence[int]) -> Trace:
    models = [trace.models[p] for p in positions]
    times = [trace.times[p] for p in positions] if trace.times else []
    distinct = set(models)
    sizes = {m: trace.sizes[m] for m in distinct}
    return Trace(models, sizes, {m: trace.reload_ms[m] for m in distinct}, times)
