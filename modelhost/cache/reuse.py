"""Byte stack distances, online: the smallest LRU budget at which each use would have hit.

A use hits at budget B when its size plus the sizes used since its last use is at most B.
"""

from __future__ import annotations

import math

MIN_POSITIONS = 1024


class Fenwick:
    """Prefix sums over positions, each updated and summed in O(log n)."""

    def __init__(self, values: list[int]) -> None:
        self.tree = [0, *values]
        for index in range(1, len(self.tree)):  # O(n): each node passes its sum up
            parent = index + (index & -index)
            if parent < len(self.tree):
                self.tree[parent] += self.tree[index]

    def add(self, index: int, delta: int) -> None:
        index += 1
        while index < len(self.tree):
            self.tree[index] += delta
            index += index & -index

    def move(self, source: int, removed: int, target: int, added: int) -> None:
        """`add(source, -removed)`, `add(target, added)` in one pass, for `source < target`."""
        tree, end = self.tree, len(self.tree)
        i, j = source + 1, target + 1
        while i < j:  # nodes covering the source only
            tree[i] -= removed
            i += i & -i
        stop = min(i, end)  # i is the first node covering both
        while j < stop:
            tree[j] += added
            j += j & -j
        if delta := added - removed:
            while i < end:
                tree[i] += delta
                i += i & -i

    def prefix(self, index: int) -> int:
        total = 0
        while index > 0:
            total += self.tree[index]
            index -= index & -index
        return total


class StackDistances:
    """Each use's byte stack distance; infinity for a first use.

    Each group's bytes count with its weight, so a hash sample can stand for the names it omits.
    """

    def __init__(self, groups: int = 1, min_positions: int = MIN_POSITIONS) -> None:
        self._latest: dict[str, tuple[int, int, int]] = {}
        self.min_positions = min_positions
        self.weights = [1.0] * groups
        self._trees = [Fenwick([0] * min_positions) for _ in range(groups)]
        self._totals = [0] * groups
        self._next = 0
        self._top = ""  # used again, nothing moves

    def __len__(self) -> int:
        return len(self._latest)

    def __contains__(self, name: object) -> bool:
        return name in self._latest

    def use(self, name: str, size: int, group: int = 0) -> float:
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
        self._trees[group].move(position, old_size, self._next, size)
        self._totals[group] += size - old_size
        self._latest[name] = (self._next, size, group)
        self._next += 1
        self._top = name
        return distance

    @property
    def positions(self) -> int:
        return len(self._trees[0].tree) - 1

    def forget(self, name: str) -> None:
        """Its next use is a first use, and it counts in no other's distance."""
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
        """Number the tracked objects 0.. in order, in trees twice their number."""
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
