"""Policies the simulator replays besides the server's own (`modelhost.cache.policy`).

`CostAwarePolicy` is the cost-aware option DESIGN.md §3 describes, which the server does not have
yet: it follows the server's `EvictionPolicy` protocol, so it can move into `cache/policy.py`
unchanged once the simulator has shown where it pays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Valued(Protocol):
    @property
    def bytes(self) -> int: ...

    @property
    def last_used(self) -> float: ...

    @property
    def hits(self) -> int: ...

    @property
    def load_ms(self) -> float: ...


V = TypeVar("V", bound=Valued)


class CostAwarePolicy:
    """Lowest value first, value = hits since loaded × reload cost (ms) / bytes; the least
    recently used first among equals. Keeps what is used often and dear to reload per byte."""

    def choose(self, candidates: Sequence[V], need_bytes: int) -> list[V] | None:
        victims: list[V] = []
        freed = 0
        ranked = sorted(
            candidates, key=lambda c: (c.hits * c.load_ms / max(1, c.bytes), c.last_used)
        )
        for candidate in ranked:
            if freed >= need_bytes:
                break
            victims.append(candidate)
            freed += candidate.bytes
        return victims if freed >= need_bytes else None
