"""The memory tier: which models hold how many bytes against the memory budget.

No I/O, so its invariants are tested directly: a granted reservation stays within the budget, and
a victim is loaded, idle and unpinned. The tier keeps the records in a ledger of running totals,
asks `Victims` which loaded models may leave, keeps its baseline and headroom in a
`MemoryBudget`, and gives copies on more workers only free room.
"""

from modelhost.cache.memory.budget import DRIFT_READINGS, FrontendAllowance, MemoryBudget
from modelhost.cache.memory.ledger import Resident, State
from modelhost.cache.memory.tier import MemoryTier

__all__ = ["DRIFT_READINGS", "FrontendAllowance", "MemoryBudget", "MemoryTier", "Resident", "State"]
