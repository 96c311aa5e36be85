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

    def move(self, source: int, removed: int, target: int, added: int) -> None:
        """`add(source, -removed)` then `add(target, added)` for `source < target`, the nodes
        that cover both changed once (not at all when the two are equal)."""
        tree, end = self.tree, len(self.tree)
        i, j = source + 1, target + 1
        while i < j:  # nodes that cover the source and end before the target
            tree[i] -= removed
            i += i & -i
        stop = min(i, end)  # i is the first node that covers both
        while j < stop:  # nodes that cover the target only
            tree[j] += added
            j += j & -j
        if delta := added - removed:
            while i < end:
                tree[i] += delta
                i += i & -i

    def prefix(self, index: int) -> int:
        """Sum of positions [0, index)."""
        total = 0
        while index > 0:
            total += self.tree[index]
            index -= index & -index
        return total


class StackDistances:
    """Each use's byte stack distance; infinity for an object's first use (or first since
    `forget`).

    Objects belong to groups, each with a weight its bytes count for in others' distances (a
    sample of names stands for the names it leaves out: `cache/curve.py`); one group of weight 1
    gives the plain distance."""

    def __init__(self, groups: int = 1, min_positions: int = MIN_POSITIONS) -> None:
        # name: (position of its last use, size, group)
        self._latest: dict[str, tuple[int, int, int]] = {}
        self.min_positions = min_positions
        self.weights = [1.0] * groups
        self._trees = [Fenwick([0] * min_positions) for _ in range(groups)]
        self._totals = [0] * groups  # each group's sizes, at their latest uses
        self._next = 0  # the position the next use takes
        self._top = ""  # the object used last: used again, nothing moves

    def __len__(self) -> int:
        return len(self._latest)

    def __contains__(self, name: object) -> bool:
        return name in self._latest

    def use(self, name: str, size: int, group: int = 0) -> float:
        """Record a use of `name`, `size` bytes now; its distance."""
        latest = self._latest.get(name)
        if latest is None:
            self._push(name, size, group)
            return math.inf
        position, old_size, old_group = latest
        if name == self._top and size == old_size and group == old_group:
            return float(size)
        distance = float(size)
        for weight, tree, total in zip(self.weights, self._trees, self._totals, strict=True):
            if total:
                distance += weight * (total - tree.prefix(position + 1))
        if group != old_group or self._next == self.positions:
            self.forget(name)
            self._push(name, size, group)
            return distance
        self._trees[group].move(position, old_size, self._next, size)  # to the top, in one pass
        self._totals[group] += size - old_size
        self._latest[name] = (self._next, size, group)
        self._next += 1
        self._top = name
        return distance

    @property
    def positions(self) -> int:
        return len(self._trees[0].tree) - 1

    def forget(self, name: str) -> None:
        """Stop tracking `name`: its next use is a first use, and it is in no other's distance."""
        latest = self._latest.pop(name, None)
        if latest is not None:
            position, size, group = latest
            self._trees[group].add(position, -size)
            self._totals[group] -= size
            self._top = "" if name == self._top else self._top

    def _push(self, name: str, size: int, group: int) -> None:
        if self._next == self.positions:
            self._renumber()
        self._trees[group].add(self._next, size)
        self._totals[group] += size
        self._latest[name] = (self._next, size, group)
        self._next += 1
        self._top = name

    def _renumber(self) -> None:
        """Give the tracked objects positions 0.. in the order of their last uses, in trees
        twice their number."""
        ordered = sorted(self._latest.items(), key=lambda item: item[1][0])
        capacity = max(self.min_positions, 2 * len(ordered))
        columns = [[0] * capacity for _ in self._trees]
        for index, (_, (_, size, group)) in enumerate(ordered):
            columns[group][index] = size
        self._trees = [Fenwick(column) for column in columns]
        self._latest = {
            name: (i, size, group) for i, (name, (_, size, group)) in enumerate(ordered)
        }
        self._next = len(ordered)
