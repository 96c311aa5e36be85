"""The memory budget as the server starts serving."""

from __future__ import annotations

import logging

from modelhost.cache.memory import MemoryBudget
from modelhost.errors import ConfigError
from modelhost.host.model_host import ModelHost
from modelhost.records.events import EventLog
from modelhost.records.memory import private_bytes, pss_bytes, server_pss_bytes
from modelhost.units import format_bytes

logger = logging.getLogger("modelhost")


def refuse_unaffordable(budget: MemoryBudget, workers: int) -> None:
    """Refuses budgets below the idle server."""
    if budget.budget_bytes > budget.baseline_bytes:
        return
    growth = budget.frontend.growth_bytes if budget.frontend else 0
    needed = format_bytes(budget.baseline_bytes)
    raise ConfigError(
        f"the memory budget of {format_bytes(budget.budget_bytes)} is below what the idle "
        f"server needs: {needed} (frontend, template and {workers} workers, as PSS, and "
        f"{format_bytes(growth)} of growth allowed to the frontend); set --memory-budget "
        f"above {needed}, or use fewer --workers or a smaller --frontend-memory-allowance"
    )


def refuse_workers_past(budget_bytes: int, growth_bytes: int, forked: list[int], size: int) -> None:
    """With the first workers forked, refuses a pool of `size` that no budget this size holds.

    The rest are counted at half what the first hold alone: a guard against a count far past
    the budget, before it forks; `refuse_unaffordable` checks the whole pool once it serves.
    """
    if size <= len(forked):
        return
    own = sum(private_bytes(pid) for pid in forked) // len(forked) // 2
    fixed = server_pss_bytes(forked) + growth_bytes
    least = fixed + (size - len(forked)) * own
    if least <= budget_bytes:
        return
    fit = len(forked) + max(0, budget_bytes - fixed) // max(own, 1)
    raise ConfigError(
        f"the memory budget of {format_bytes(budget_bytes)} is below what the idle server "
        f"needs: at least {format_bytes(least)} (frontend, {size} workers of at least "
        f"{format_bytes(own)} each, and {format_bytes(growth_bytes)} of growth allowed to the "
        f"frontend); set --memory-budget above {format_bytes(least)}, or use fewer --workers (at "
        f"most {fit} fit)"
    )


def settle_budgets(host: ModelHost, events: EventLog) -> None:
    """Counts the frontend's size with its ports up as idle; says the budgets."""
    budget = host.memory.budget
    budget.settle_frontend(pss_bytes())
    refuse_unaffordable(budget, len(host.pool.workers))
    frontend = budget.frontend
    events.emit(
        "budget",
        reason="start",
        detail={
            "memory_budget_bytes": budget.budget_bytes,
            "baseline_bytes": budget.baseline_bytes,
            "frontend_bytes": frontend.start_bytes if frontend else 0,
            "frontend_allowance_bytes": frontend.bytes if frontend else 0,
            "disk_budget_bytes": host.disk.budget_bytes,
        },
    )
    if frontend is not None:
        logger.info(
            "the frontend uses %(start)s serving and may grow by %(growth)s "
            "(--frontend-memory-allowance); the idle server is %(idle)s and models have "
            "%(models)s of the %(budget)s budget",
            {
                "start": format_bytes(frontend.start_bytes),
                "growth": format_bytes(frontend.growth_bytes),
                "idle": format_bytes(budget.baseline_bytes),
                "models": format_bytes(budget.capacity_bytes),
                "budget": format_bytes(budget.budget_bytes),
            },
        )
