"""A front's tenants: whose a hit is, and whether the front may answer it (docs/tenants.md,
"Fronts")."""

from __future__ import annotations

from modelhost.errors import ModelhostError
from modelhost.fronts.messages import Tenancy
from modelhost.protocols.tenants import Headers, kept_to_own_models, request_rule


class FrontTenants:
    """The table's tenancy, its rule built once."""

    def __init__(self, tenancy: Tenancy) -> None:
        rule = request_rule(tenancy.tenant_from, lambda: tenancy.tokens)
        assert rule is not None  # the main process publishes no other
        self.rule = kept_to_own_models(rule, tenancy.model_segments)
        self.held = frozenset(tenancy.held)
        self.hold_others = tenancy.hold_others
        self.weights, self.default_weight = tenancy.weights, tenancy.default_weight

    def of(self, model: str, headers: Headers) -> str | None:
        """The hit's tenant; None: relay it."""
        try:
            tenant = self.rule.of(model, headers)
        except ModelhostError:
            return None
        if tenant in self.held or (self.hold_others and tenant not in self.weights):
            return None
        return tenant

    def weight(self, tenant: str) -> float:
        return self.weights.get(tenant, self.default_weight)
