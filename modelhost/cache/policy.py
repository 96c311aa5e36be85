"""Eviction policies, shared with `modelhost simulate` so that it predicts the server."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

MiB = 2**20
FREQUENCY_CAP_HITS = 31  # so a once-hot model ages out in bounded time


class Sized(Protocol):
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
Admit = Callable[[Sized], bool]  # whether a candidate may go (admission's test)


class EvictionPolicy(Protocol):
    """Chooses which idle models leave memory to make room; one per --eviction-policy."""

    name: str  # also the reason eviction events give

    def touched(self, item: Sized) -> None:
        """Loaded or used just now."""

    def key(self, item: Sized) -> Any:
        """The policy's order, lowest first; a use never lowers it."""

    def take(
        self, ordered: Iterable[T], need_bytes: int, admit: Admit | None = None
    ) -> list[T] | None:
        """The first candidates of `ordered` (in `key` order) that `admit` lets go, until they
        free need_bytes; None when all of them cannot."""


def choose(
    policy: EvictionPolicy, candidates: Sequence[T], need_bytes: int, admit: Admit | None = None
) -> list[T] | None:
    """`take` over a list of candidates, sorted in the policy's order."""
    return policy.take(sorted(candidates, key=policy.key), need_bytes, admit)


def take_until(ranked: Iterable[T], need_bytes: int, admit: Admit | None = None) -> list[T] | None:
    """`admit` is asked only of the candidates walked, so a test that costs is paid per victim."""
    victims: list[T] = []
    freed = 0
    for candidate in ranked:
        if freed >= need_bytes:
            break
        if admit is None or admit(candidate):
            victims.append(candidate)
            freed += candidate.bytes
    return victims if freed >= need_bytes else None


class LRUPolicy:
    """What SageMaker multi-model endpoint users expect."""

    name = "lru"

    def touched(self, item: Sized) -> None:
        """The tier keeps `last_used`."""

    def key(self, item: Sized) -> float:
        return item.last_used

    def take(
        self, ordered: Iterable[T], need_bytes: int, admit: Admit | None = None
    ) -> list[T] | None:
        return take_until(ordered, need_bytes, admit)


class CostAwarePolicy:
    """GreedyDual-Size-Frequency (Cherkasova 1998): the lowest value goes first.

        value = inflation + min(hits, 31) × load_ms / MiB, set at each load or use

    `inflation` rises to each victim's value, so yesterday's hot model ages out.
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

    def key(self, item: Sized) -> tuple[float, float]:
        return self.values.get(item.name, 0.0), item.last_used

    def take(
        self, ordered: Iterable[T], need_bytes: int, admit: Admit | None = None
    ) -> list[T] | None:
        victims = take_until(ordered, need_bytes, admit)
        for victim in victims or []:
            self.inflation = max(self.inflation, self.values.pop(victim.name, 0.0))
        return victims


POLICIES: dict[str, Callable[[], EvictionPolicy]] = {
    "lru": LRUPolicy,
    "cost-aware": CostAwarePolicy,
}


def policy_named(name: str) -> EvictionPolicy:
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(
            f"unknown eviction policy {name!r}: choose one of {', '.join(POLICIES)}"
        ) from None
