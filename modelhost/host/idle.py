"""Idle unloads: a model leaves after its own idle_unload_s, else the server's (0: never)."""

from __future__ import annotations

from collections.abc import Mapping

from modelhost.cache.memory import MemoryTier, Resident


def idle_victims(
    memory: MemoryTier, own_s: Mapping[str, float], server_s: float, now: float
) -> list[Resident]:
    """The models unused past their idle time, claimed for unloading."""
    if not own_s:  # the server's time alone: the tier walks only the idle models
        return memory.victims.idle(server_s) if server_s else []
    due = [r for r in memory if r.evictable and _past(r, own_s.get(r.name, server_s), now)]
    return memory.ledger.claim(due)


def _past(resident: Resident, idle_s: float, now: float) -> bool:
    return 0 < idle_s <= now - resident.last_used


def check_interval_s(server_s: float, own_s: Mapping[str, float], most_s: float) -> float:
    """How often to look: a quarter of the shortest idle time in force, at most `most_s`."""
    quarters = [idle_s / 4 for idle_s in (server_s, *own_s.values()) if idle_s > 0]
    return min([most_s, *quarters])
