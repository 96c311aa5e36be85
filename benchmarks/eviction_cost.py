"""A load that must evict, in the memory tier alone, beside N models loaded.

In process, no server: a tier full of N equal models (admission on, as by default), then loads
of new names, each evicting one; the milliseconds a load spends choosing and claiming its victim,
for each policy. The tier is the server's own, so this is the frontend's event-loop time an
evicting miss or registration spends in it (and `modelhost simulate`'s time a replayed miss).

    python benchmarks/eviction_cost.py                          # N = 1,000, 10,000, 100,000
    python benchmarks/eviction_cost.py --models 3500 --loads 1000
"""

from __future__ import annotations

import argparse
import time

from _common import markdown_table, write_results

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.memory import MemoryBudget, MemoryTier
from modelhost.cache.policy import POLICIES

KiB = 2**10


def evicting_load_ms(policy: str, models: int, loads: int) -> float:
    budget = MemoryBudget(models * KiB, 0)
    memory = MemoryTier(budget, POLICIES[policy](), admission=FrequencySketch())
    for i in range(models):
        memory.reserve(f"m{i}", KiB)
        memory.mark_loaded(f"m{i}", 1, KiB, 5.0)
    started = time.perf_counter()
    for k in range(loads):
        for victim in memory.reserve(f"new{k}", KiB) or []:
            memory.remove(victim.name)
        memory.mark_loaded(f"new{k}", 1, KiB, 5.0)
        memory.victims.longest_idle_s()  # what an eviction's event reads
    return (time.perf_counter() - started) / loads * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--loads", type=int, default=300)
    args = parser.parse_args()
    rows = []
    for models in args.models:
        for policy in POLICIES:
            rows.append([models, policy, round(evicting_load_ms(policy, models, args.loads), 3)])
            print(rows[-1], flush=True)
    table = markdown_table(["models loaded", "policy", "ms an evicting load"], rows)
    path = write_results("eviction_cost", {"settings": vars(args), "rows": rows}, table)
    print(table)
    print(f"\nraw results: {path}")


if __name__ == "__main__":
    main()
