"""The memory tier: which models hold how many bytes against the memory budget.

No I/O, so its invariants are tested directly: a granted reservation stays within the budget,
a victim is loaded, idle and unpinned, and copies on more workers get only free room.
"""

from modelhost.cache.memory.budget import DRIFT_READINGS, FrontendAllowance, MemoryBudget
from modelhost.cache.memory.ledger import Resident, State
from modelhost.cache.memory.tier import MemoryTier

__all__ = ["DRIFT_READINGS", "FrontendAllowance", "MemoryBudget", "MemoryTier", "Resident", "State"]
