"""Eviction policies: given the evictable models and the bytes needed, which to unload.

One implementation of each serves both the memory tier and `modelhost simulate`, so the simulator
predicts what the server does. A policy sees what a `Resident` shows (`Sized`); the tier tells it
when a model was used (`touched`) so a stateful policy can keep its own ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

MiB = 2**20
FREQUENCY_CAP_HITS = 31  # past this, more hits add nothing: a once-hot model must age out in time


class Sized(Protocol):
    """What a policy may read of a model in memory."""

    @property
    def name(self) -> str: ...

    @property
    def bytes(self) -> int: ...

    @property
    def last_used(self) -> float: ...

    @property
    def hits(self) -> int: ...

    @property
    def load_ms(self) -> float | None: ...


T = TypeVar("T", bound=Sized)


class EvictionPolicy(Protocol):
    """Chooses which idle models leave memory to make room; one per --eviction-policy."""

    name: str  # as --eviction-policy spells it, and as eviction events give their reason

    def touched(self, item: Sized) -> None:
        """`item` was just loaded or served a request."""

    def choose(self, candidates: Sequence[T], need_bytes: int) -> list[T] | None:
        """The victims freeing at least need_bytes, or None when all of them together cannot."""


def take_until(ranked: Sequence[T], need_bytes: int) -> list[T] | None:
    """The shortest prefix of `ranked` freeing need_bytes, or None when all of it cannot."""
    victims: list[T] = []
    freed = 0
    for candidate in ranked:
        if freed >= need_bytes:
            break
        victims.append(candidate)
        freed += candidate.bytes
    return victims if freed >= need_bytes else None


class LRUPolicy:
    """Least recently used first: what SageMaker multi-model endpoint users expect."""

    name = "lru"

    def touched(self, item: Sized) -> None:
        """LRU reads `last_used`, which the tier keeps."""

    def choose(self, candidates: Sequence[T], need_bytes: int) -> list[T] | None:
        return take_until(sorted(candidates, key=lambda c: c.last_used), need_bytes)


class CostAwarePolicy:
    """GreedyDual-Size-Frequency (Cherkasova 1998): lowest value first, where a model's value,
    set each time it is loaded or used, is

        value = inflation + min(hits, 31) × reload cost (load_ms) / size (MiB)

    `hits` counts requests since the model was loaded. `inflation` is the clock that makes old
    values age: it starts at 0 and rises to the value of each victim as it is evicted, so a model
    used often long ago ends up below one used less often lately (plain frequency × cost / size
    would keep yesterday's hot model forever). The cap on hits bounds how far ahead of the clock
    a model can get, so that aging takes a bounded time after its traffic moves elsewhere
    (docs/decisions.md has the traces). Among equal values the least recently used goes first. A
    model the policy never saw touched (none in the server) counts as value 0.
    """

    name = "cost-aware"

    def __init__(self) -> None:
        self.inflation = 0.0
        self.values: dict[str, float] = {}

    def value_of(self, item: Sized) -> float:
        frequency = min(item.hits, FREQUENCY_CAP_HITS)
        return self.inflation + frequency * (item.load_ms or 0.0) / max(1, item.bytes) * MiB

    def touched(self, item: Sized) -> None:
        self.values[item.name] = self.value_of(item)

    def choose(self, candidates: Sequence[T], need_bytes: int) -> list[T] | None:
        ranked = sorted(candidates, key=lambda c: (self.values.get(c.name, 0.0), c.last_used))
        victims = take_until(ranked, need_bytes)
        for victim in victims or []:
            self.inflation = max(self.inflation, self.values.pop(victim.name, 0.0))
        return victims


POLICIES: dict[str, Callable[[], EvictionPolicy]] = {
    "lru": LRUPolicy,
    "cost-aware": CostAwarePolicy,
}


def policy_named(name: str) -> EvictionPolicy:
    """A fresh policy by its configuration name (`--eviction-policy`)."""
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(
            f"unknown eviction policy {name!r}: choose one of {', '.join(POLICIES)}"
        ) from None
