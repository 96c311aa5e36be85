"""Items held and counted together: the request path's accounting runs warm, in one loop.

Whoever reads what `count` feeds calls `fold` first, so a read sees every item added.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
FOLD_AFTER = 64  # items held before they are counted


class Held(Generic[T]):
    def __init__(self, count: Callable[[list[T]], None]) -> None:
        self.count = count
        self.items: list[T] = []

    def add(self, item: T) -> None:
        items = self.items
        items.append(item)
        if len(items) >= FOLD_AFTER:
            self.fold()

    def fold(self) -> None:
        """Count the items held."""
        items, self.items = self.items, []
        if items:
            self.count(items)
