"""A miss and a hit beside 10,000 loaded models read none of them (counting fakes)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cache.test_memory_scale import CountingResidents, filled

from host.fakes import AnsweringPool, host_with
from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import CostAwarePolicy
from modelhost.host import Invocation

GiB = 2**30


def test_a_miss_and_a_hit_read_no_other_resident(tmp_path: Path) -> None:
    memory = filled(MemoryTier(MemoryBudget(GiB, 0), CostAwarePolicy()))
    counting = memory.ledger.residents = CountingResidents(memory.residents)
    host = host_with(AnsweringPool(2), tmp_path, {}, memory=memory)

    async def miss_then_hit() -> list[str]:
        invocation = Invocation(b"[1]", "application/json", "application/json")
        return [(await host.invoke("new", invocation)).cache for _ in range(2)]

    assert asyncio.run(miss_then_hit()) == ["disk", "hit"]
    assert counting.read == 0
