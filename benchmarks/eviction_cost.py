"""A load that must evict, in the memory tier alone, beside N models loaded.

In process, no server: a tier full of N equal models (admission on, as by default), then loads
of new names, each evicting one; the milliseconds a load spends choosing and claiming its victim,
for each policy. The tier is the server's own, so this is the frontend's event-loop time an
evicting miss or registration spends in it (and `modelhost simulate`'s time a replayed miss).

    python benchmarks/eviction_cost.py                          # N = 1,000, 10,000, 100,000
    python benchmarks/eviction_cost.py --models 3500 --loads 1000
    python benchmarks/eviction_cost.py --tenants 100            # models of 100 tenants, with
                                                                # minimums and maximums
"""

from __future__ import annotations

import argparse
import time

from _common import markdown_table, write_results

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import POLICIES
from modelhost.cache.quotas import NO_LIMITS, Limits, NoLimits, no_limits

KiB = 2**10


def tenants_limits(tenants: int, models: int) -> Limits:
    """Every other tenant guaranteed half its share of the models; each capped at its share, so
    that each load evicts a model of its own tenant."""
    if not tenants:
        return no_limits
    share = models * KiB // tenants
    limits = {
        f"t{i}": NoLimits(memory_min_bytes=share // 2 * (i % 2), memory_max_bytes=share)
        for i in range(tenants)
    }
    return lambda tenant: limits.get(tenant, NO_LIMITS)


def evicting_load_ms(policy: str, models: int, loads: int, tenants: int = 0) -> float:
    budget = MemoryBudget(models * KiB, 0)
    limits = tenants_limits(tenants, models)
    memory = MemoryTier(budget, POLICIES[policy](), admission=FrequencySketch(), limits=limits)

    def tenant(i: int) -> str:
        return f"t{i % tenants}" if tenants else ""

    for i in range(models):
        memory.reserve(f"m{i}", KiB, tenant=tenant(i))
        memory.mark_loaded(f"m{i}", 1, KiB, 5.0)
    started = time.perf_counter()
    for k in range(loads):
        for victim in memory.reserve(f"new{k}", KiB, tenant=tenant(k)) or []:
            memory.remove(victim.name)
        memory.mark_loaded(f"new{k}", 1, KiB, 5.0)
        memory.victims.longest_idle_s()  # what an eviction's event reads
    return (time.perf_counter() - started) / loads * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--loads", type=int, default=300)
    parser.add_argument("--tenants", type=int, default=0, help="0: tenants off")
    args = parser.parse_args()
    rows = []
    for models in args.models:
        for policy in POLICIES:
            ms = evicting_load_ms(policy, models, args.loads, args.tenants)
            rows.append([models, policy, round(ms, 3)])
            print(rows[-1], flush=True)
    table = markdown_table(["models loaded", "policy", "ms an evicting load"], rows)
    path = write_results("eviction_cost", {"settings": vars(args), "rows": rows}, table)
    print(table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
