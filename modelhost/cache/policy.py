"""Eviction policies: given the evictable models and the bytes needed, which to unload."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar


class Sized(Protocol):
    @property
    def bytes(self) -> int: ...

    @property
    def last_used(self) -> float: ...


T = TypeVar("T", bound=Sized)


class EvictionPolicy(Protocol):
    def choose(self, candidates: Sequence[T], need_bytes: int) -> list[T] | None:
        """The victims freeing at least need_bytes, or None when all of them together cannot."""


class LRUPolicy:
    """Least recently used first: what SageMaker multi-model endpoint users expect."""

    def choose(self, candidates: Sequence[T], need_bytes: int) -> list[T] | None:
        victims: list[T] = []
        freed = 0
        for candidate in sorted(candidates, key=lambda c: c.last_used):
            if freed >= need_bytes:
                break
            victims.append(candidate)
            freed += candidate.bytes
        return victims if freed >= need_bytes else None
