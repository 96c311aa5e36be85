"""Invocations a front answered 200, counted together (docs/decisions.md, "Fronts")."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


@dataclass(slots=True)
class Hits:
    """A list a field, an item a hit, in the order answered."""

    routes: list[str]
    models: list[str]
    times: list[float]  # epoch seconds each arrived
    durations_s: list[float]
    infer_ms: list[float]
    bytes_in: list[int]
    bytes_out: list[int]

    def ended(self, place: int) -> float:
        return self.times[place] + self.durations_s[place]

    def bytes_at(self, places: Sequence[int]) -> tuple[int, int]:
        """The bytes in and out of the hits at `places`."""
        bytes_in: int = sum(at(self.bytes_in, places))
        return bytes_in, sum(at(self.bytes_out, places))

    def last_places(self) -> list[tuple[str, int]]:
        """Each model and the place of its last hit, in that order."""
        last = {model: place for place, model in enumerate(self.models)}
        return sorted(last.items(), key=lambda item: item[1])


def places_by(keys: list[K]) -> dict[K, list[int]]:
    """Each key's places, in the order of its first."""
    if len(set(keys)) == 1:
        return {keys[0]: list(range(len(keys)))}
    places: dict[K, list[int]] = {}
    for place, key in enumerate(keys):
        places.setdefault(key, []).append(place)
    return places


def by_last_place(places: dict[K, list[int]]) -> list[tuple[K, list[int]]]:
    """`places_by`'s keys by their last place: counted so, a key at a time, an LRU ends as one
    by one."""
    return sorted(places.items(), key=_last_place)


def _last_place(item: tuple[K, list[int]]) -> int:
    return item[1][-1]


def at(values: list[T], places: Sequence[int]) -> list[T]:
    return values if len(places) == len(values) else [values[place] for place in places]
