"""Byte stack distances, online: the smallest LRU budget at which each use would have hit.

Under LRU with objects of different sizes the cache always holds the longest prefix of the recency
stack that fits the budget (a miss puts the object on top and evicts from the bottom until it
fits; a hit only reorders inside the prefix). So a use hits at budget B exactly when its object's
byte stack distance, its own size plus the sizes of the distinct objects used since its last use,
is at most B. A Fenwick tree over use positions, holding each object's size at its latest use,
gives each distance in O(log n); when its positions run out, the live ones are numbered again in
order, so the tree stays as large as twice the objects it tracks, however long the stream.

`modelhost simulate` (every use of a trace) and the server's live curve (a sample of names,
`cache/curve.py`) both measure with this class.
"""

from __future__ import annotations

import math

MIN_POSITIONS = 1024


class Fenwick:
    """Prefix sums over positions, each updated and summed in O(log n)."""

    def __init__(self, values: list[int]) -> None:
        self.tree = [0, *values]
        for index in range(1, len(self.tree)):  # built in O(n): each node passes its sum up
            parent = index + (index & -index)
            if parent < len(self.tree):
                self.tree[parent] += self.tree[index]

    def add(self, index: int, delta: int) -> None:
        index += 1
        while index < len(self.tree):
            self.tree[index] += delta
            index += index & -index

    def prefix(self, index: int) -> int:
        """Sum of positions [0, index)."""
        total = 0
        while index > 0:
            total += self.tree[index]
            index -= index & -index
        return total


class StackDistances:
    """Each use's byte stack distance; infinity for an object's first use (or first since
    `forget`)."""

    def __init__(self, min_positions: int = MIN_POSITIONS) -> None:
        self._latest: dict[str, tuple[int, int]] = {}  # name: (position of its last use, size)
        self.min_positions = min_positions
        self._tree = Fenwick([0] * min_positions)
        self._next = 0  # the position the next use takes
        self._total = 0  # the sizes of every tracked object, at their latest uses
        self._top = ""  # the object used last: used again, nothing moves

    def __len__(self) -> int:
        return len(self._latest)

    def __contains__(self, name: object) -> bool:
        return name in self._latest

    def use(self, name: str, size: int) -> float:
        """Record a use of `name`, `size` bytes now; its distance."""
        latest = self._latest.get(name)
        if latest is None:
            distance = math.inf
        else:
            position, old_size = latest
            if name == self._top and size == old_size:
                return float(size)
            distance = float(size + self._total - self._tree.prefix(position + 1))
            self.forget(name)
        self._push(name, size)
        return distance

    def forget(self, name: str) -> None:
        """Stop tracking `name`: its next use is a first use, and it is in no other's distance."""
        latest = self._latest.pop(name, None)
        if latest is not None:
            position, size = latest
            self._tree.add(position, -size)
            self._total -= size
            self._top = "" if name == self._top else self._top

    def _push(self, name: str, size: int) -> None:
        if self._next == len(self._tree.tree) - 1:
            self._renumber()
        self._tree.add(self._next, size)
        self._total += size
        self._latest[name] = (self._next, size)
        self._next += 1
        self._top = name

    def _renumber(self) -> None:
        """Give the tracked objects positions 0.. in the order of their last uses, in a tree
        twice their number."""
        ordered = sorted(self._latest.items(), key=lambda item: item[1][0])
        sizes = [size for _, (_, size) in ordered]
        capacity = max(self.min_positions, 2 * len(sizes))
        self._tree = Fenwick(sizes + [0] * (capacity - len(sizes)))
        self._latest = {name: (i, size) for i, (name, (_, size)) in enumerate(ordered)}
        self._next = len(sizes)
