"""Replays of a trace per tenant, under the tenants file's shares of the memory budget.

It mirrors the server's eviction with quotas (docs/decisions.md, "Tenants' memory"): a load
evicts first its own tenant's models past `memory_max_bytes`, then others' above their
`memory_min_bytes`. A load that cannot fit is refused, as the server's 507, and leaves memory
as it was. A model is charged to the tenant whose request loaded it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from modelhost.cache.policy import Admit, EvictionPolicy, Sized, policy_named, take_until
from modelhost.config.tenancy import TenantFrom
from modelhost.config.tenant_policies import TenantPolicies
from modelhost.errors import InvalidTenant
from modelhost.protocols.tenants import DEFAULT_TENANT, FromName
from modelhost.toolkit.simulate.trace import Trace


@dataclass(eq=False)
class Held:
    """A model in memory, as the eviction policies see it, and whose it is."""

    name: str
    tenant: str
    bytes: int
    last_used: float
    load_ms: float | None
    hits: int = 0


@dataclass
class TenantFigures:
    """One tenant's requests over a replay, or the sum of all of them."""

    requests: int = 0
    hits: int = 0
    loads: int = 0
    refused: int = 0  # loads that could not fit: the server's 507
    evictions_suffered: int = 0  # its models evicted, by any tenant's load
    evictions_caused: int = 0  # models its loads evicted, any tenant's

    @property
    def hit_ratio(self) -> float:
        return self.hits / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "hit_ratio": self.hit_ratio}


@dataclass
class TenantReplay:
    tenants: dict[str, TenantFigures] = field(default_factory=dict)

    @property
    def total(self) -> TenantFigures:
        names = [f.name for f in fields(TenantFigures)]
        return TenantFigures(
            **{name: sum(getattr(t, name) for t in self.tenants.values()) for name in names}
        )


def tenants_of(trace: Trace, rule: TenantFrom) -> list[str]:
    """Each request's tenant: from the model's name under `name:N`, else the log's field."""
    if rule.kind == "name":
        by_model = {model: _leading(rule.segments, model) for model in trace.sizes}
        return [by_model[model] for model in trace.models]
    if not any(trace.tenants):
        raise ValueError(
            "the access log has no tenant field: its server ran with tenants off. Give "
            "--tenant-from name:N to take each tenant from the model names' leading segments"
        )
    return [tenant or DEFAULT_TENANT for tenant in trace.tenants]


def _leading(segments: int, model: str) -> str:
    try:
        return FromName(segments).of(model, {})
    except InvalidTenant as error:
        raise ValueError(str(error)) from None


def replay_tenants(
    trace: Trace,
    tenants: list[str],
    budget_bytes: int,
    policy: str,
    policies: TenantPolicies | None = None,
) -> TenantReplay:
    """Each tenant's figures over the trace at one budget, under `policies`' memory shares."""
    cache = TenantCache(budget_bytes, policy_named(policy), policies)
    for position, model in enumerate(trace.models):
        now = trace.times[position] if trace.times else float(position)
        cache.serve(model, tenants[position], trace.sizes[model], trace.reload_ms[model], now)
    return cache.replay


class TenantCache:
    """The models in memory, each tenant's bytes, and the figures of the requests served."""

    def __init__(
        self, budget_bytes: int, policy: EvictionPolicy, policies: TenantPolicies | None = None
    ) -> None:
        self.budget_bytes, self.policy = budget_bytes, policy
        self.policies = policies or TenantPolicies()
        self.residents: dict[str, Held] = {}  # in load order: the server's ties go the same way
        self.held_bytes: Counter[str] = Counter()
        self.replay = TenantReplay()

    def serve(self, model: str, tenant: str, size_bytes: int, load_ms: float, now: float) -> bool:
        """One request, as the server's host serves it; True for a hit."""
        figures = self.replay.tenants.setdefault(tenant, TenantFigures())
        figures.requests += 1
        held = self.residents.get(model)
        hit = held is not None
        figures.hits += hit
        if held is None:
            held = self._load(Held(model, tenant, size_bytes, now, load_ms), figures)
            if held is None:
                figures.refused += 1
                return False
        held.hits += 1
        held.last_used = now
        self.policy.touched(held)
        return hit

    def _load(self, held: Held, figures: TenantFigures) -> Held | None:
        victims = self._room(held.tenant, held.bytes)
        if victims is None:
            return None
        # the policy's own account of its victims (GreedyDual's inflation), once they are sure
        self.policy.take(victims, sum(victim.bytes for victim in victims))
        for victim in victims:
            del self.residents[victim.name]
            self.held_bytes[victim.tenant] -= victim.bytes
            self.replay.tenants[victim.tenant].evictions_suffered += 1
        figures.evictions_caused += len(victims)
        figures.loads += 1
        self.residents[held.name] = held
        self.held_bytes[held.tenant] += held.bytes
        self.policy.touched(held)
        return held

    def _room(self, tenant: str, size_bytes: int) -> list[Held] | None:
        """The models to evict for `tenant`'s load; None: it is refused."""
        cap_bytes = self.policies.of(tenant).memory_max_bytes
        if size_bytes > self.budget_bytes or (cap_bytes and size_bytes > cap_bytes):
            return None
        own = self._ordered([held for held in self.residents.values() if held.tenant == tenant])
        over_bytes = self.held_bytes[tenant] + size_bytes - cap_bytes if cap_bytes else 0
        victims = take_until(own, over_bytes) or []  # its own always make room for it
        freed_bytes = sum(victim.bytes for victim in victims)
        need_bytes = sum(self.held_bytes.values()) - freed_bytes + size_bytes - self.budget_bytes
        rest = self._ordered([held for held in self.residents.values() if held not in victims])
        for own_floor in (True, False):
            admit = self._sparing(tenant, victims, own_floor)
            if (chosen := take_until(rest, need_bytes, admit)) is not None:
                return victims + chosen
        return None

    def _ordered(self, candidates: list[Held]) -> list[Held]:
        return sorted(candidates, key=self.policy.key)

    def _sparing(self, tenant: str, victims: list[Held], own_floor: bool) -> Admit:
        """Admits a victim while its tenant keeps its minimum; the loading tenant's own models
        below it too, unless `own_floor`."""
        left = Counter(self.held_bytes)
        left.subtract(_bytes_by_tenant(victims))

        def admit(candidate: Sized) -> bool:
            owner = self.residents[candidate.name].tenant
            keeps_bytes = left[owner] - candidate.bytes
            guarded = own_floor or owner != tenant
            if guarded and keeps_bytes < self.policies.of(owner).memory_min_bytes:
                return False
            left[owner] = keeps_bytes
            return True

        return admit


def _bytes_by_tenant(held: list[Held]) -> Counter[str]:
    totals: Counter[str] = Counter()
    for model in held:
        totals[model.tenant] += model.bytes
    return totals
