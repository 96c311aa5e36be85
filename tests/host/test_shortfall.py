"""A 507 says what holds the budget and which setting makes room."""

from __future__ import annotations

from modelhost.cache.memory import FrontendAllowance, MemoryBudget, MemoryTier
from modelhost.host.shortfall import all_busy, never_fits

MiB = 2**20


def grown_frontend() -> MemoryTier:
    """A frontend allowed 30 MiB of growth that grew by 130: 100 MiB of the models' room."""
    frontend = FrontendAllowance(start_bytes=50 * MiB, growth_bytes=30 * MiB)
    memory = MemoryTier(MemoryBudget(400 * MiB, 150 * MiB, frontend=frontend))
    memory.observe((100 + 180) * MiB, 0, frontend_bytes=180 * MiB)
    return memory


def test_frontend_growth_507_names_setting() -> None:
    """A 507 caused by the frontend's growth names its setting and by how much."""
    message = never_fits(grown_frontend(), "m", 200 * MiB)
    assert "the frontend uses 180.0 MiB, 100.0 MiB past its allowance" in message
    assert "--frontend-memory-allowance" in message


def test_busy_507_names_frontend_setting() -> None:
    """A 507 of busy models names the frontend's setting when it grew past it."""
    message = all_busy(grown_frontend(), "m", 50 * MiB, deadline_s=5)
    assert "--frontend-memory-allowance" in message


def test_a_frontend_within_its_allowance_is_not_blamed() -> None:
    frontend = FrontendAllowance(start_bytes=50 * MiB, growth_bytes=30 * MiB)
    memory = MemoryTier(MemoryBudget(400 * MiB, 150 * MiB, frontend=frontend))
    memory.observe((100 + 70) * MiB, 0, frontend_bytes=70 * MiB)
    assert "frontend" not in never_fits(memory, "m", 500 * MiB)


def test_busy_507_names_memory_not_given_back() -> None:
    """A load that waited in vain for memory being returned says how much never came back."""
    memory = MemoryTier(MemoryBudget(400 * MiB, 150 * MiB))
    memory.observe(190 * MiB, 0)
    assert "and by 40.0 MiB not yet given back" in all_busy(memory, "m", 300 * MiB, deadline_s=5)
