"""What a 507 says when a model cannot have its room."""

from __future__ import annotations

from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.units import format_bytes


def never_fits(memory: MemoryTier, name: str, size: int) -> str:
    """The model needs more than an empty server leaves."""
    b = memory.budget
    return (
        f"{_needs(b, name, size)} leaves {format_bytes(b.capacity_bytes)} for models "
        f"(the idle server uses {format_bytes(b.returned_baseline_bytes)}, and "
        f"{format_bytes(b.headroom_floor_bytes)} is kept free for its growth){_frontend(b)}; set "
        f"--memory-budget to at least {format_bytes(b.budget_bytes - b.capacity_bytes + size)}"
    )


def all_busy(memory: MemoryTier, name: str, size: int, deadline_s: float) -> str:
    """Busy models held the room until the load's deadline."""
    return (
        f"{_needs(memory.budget, name, size)} is held by models that stayed busy"
        f"{_not_returned(memory.budget)} for "
        f"{deadline_s:g} s ({format_bytes(memory.committed_bytes)} committed)"
        f"{_frontend(memory.budget)}; "
        "retry later or raise --memory-budget"
    )


def quota_never_fits(name: str, tenant: str, size: int, max_bytes: int) -> str:
    """The model needs more than its tenant may ever hold."""
    return (
        f"model {name} of tenant {tenant} needs about {format_bytes(size)} but the tenant's "
        f"memory_max is {format_bytes(max_bytes)}; raise memory_max for tenant {tenant} in the "
        "tenants file (--tenants-file) to at least "
        f"{format_bytes(size)}"
    )


def quota_busy(memory: MemoryTier, name: str, tenant: str, size: int, deadline_s: float) -> str:
    """The tenant's own models stayed busy, and its maximum left no room."""
    max_bytes = memory.limits_of(tenant).memory_max_bytes
    held = memory.ledger.tenant_bytes[tenant]
    return (
        f"model {name} of tenant {tenant} needs about {format_bytes(size)} but the tenant holds "
        f"{format_bytes(held)} of its memory_max of {format_bytes(max_bytes)} in models that "
        f"stayed busy for {deadline_s:g} s; retry later, unload one of its models, or raise "
        f"memory_max for tenant {tenant} in the tenants file (--tenants-file)"
    )


def _not_returned(budget: MemoryBudget) -> str:
    """Memory the workers still hold that a trim or a recycle should have given back."""
    held = budget.baseline_bytes - budget.returned_baseline_bytes
    return f" and by {format_bytes(held)} not yet given back" if held > 0 else ""


def _frontend(budget: MemoryBudget) -> str:
    """How far the frontend grew past its allowance."""
    excess = budget.frontend_excess_bytes
    if not excess or budget.frontend is None:
        return ""
    growth, over = format_bytes(budget.frontend.growth_bytes + excess), format_bytes(excess)
    return (
        f"; of it, the frontend uses {format_bytes(budget.frontend_bytes)}, {over} past its "
        f"allowance of {format_bytes(budget.frontend.bytes)}: raise --frontend-memory-allowance "
        f"to {growth} and --memory-budget by {over} to keep the models' room, or restart the "
        "server to give that memory back"
    )


def _needs(budget: MemoryBudget, name: str, size: int) -> str:
    total = format_bytes(budget.budget_bytes)
    return f"model {name} needs about {format_bytes(size)} but the memory budget of {total}"
