"""What a 507 says when a model cannot have its room."""

from __future__ import annotations

from modelhost.cache.memory import MemoryTier
from modelhost.units import format_bytes


def never_fits(memory: MemoryTier, name: str, size: int) -> str:
    """The model needs more than an empty server leaves."""
    m = memory
    return (
        f"{_needs(m, name, size)} leaves {format_bytes(m.capacity_bytes)} for models "
        f"(the idle server uses {format_bytes(m.baseline_bytes)}, and "
        f"{format_bytes(m.headroom_floor_bytes)} is kept free for its growth){_frontend(m)}; set "
        f"--memory-budget to at least {format_bytes(m.budget_bytes - m.capacity_bytes + size)}"
    )


def all_busy(memory: MemoryTier, name: str, size: int, deadline_s: float) -> str:
    """Busy models held the room until the load's deadline."""
    return (
        f"{_needs(memory, name, size)} is held by models that stayed busy for "
        f"{deadline_s:g} s ({format_bytes(memory.committed_bytes)} committed){_frontend(memory)}; "
        "retry later or raise --memory-budget"
    )


def _frontend(memory: MemoryTier) -> str:
    """How far the frontend grew past its allowance."""
    excess = memory.frontend_excess_bytes
    if not excess or memory.frontend is None:
        return ""
    growth, over = format_bytes(memory.frontend.growth_bytes + excess), format_bytes(excess)
    return (
        f"; of it, the frontend uses {format_bytes(memory.frontend_bytes)}, {over} past its "
        f"allowance of {format_bytes(memory.frontend.bytes)}: raise --frontend-memory-allowance "
        f"to {growth} and --memory-budget by {over} to keep the models' room, or restart the "
        "server to give that memory back"
    )


def _needs(memory: MemoryTier, name: str, size: int) -> str:
    budget = format_bytes(memory.budget_bytes)
    return f"model {name} needs about {format_bytes(size)} but the memory budget of {budget}"
