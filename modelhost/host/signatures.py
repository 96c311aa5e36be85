"""Each model's OIP signature, kept after it leaves memory.

A client that reads metadata before it infers (tritonclient) would see empty lists for every
cold model.
"""

from __future__ import annotations

from collections import OrderedDict

import msgspec

from modelhost.workers.signatures import Signature

MAX_KEPT = 10_000  # names; docs/performance.md measures their bytes


class Signatures:
    """The loaded models' signatures, and the last `max_kept` of models since unloaded."""

    def __init__(self, max_kept: int = MAX_KEPT) -> None:
        self.max_kept = max_kept
        self.loaded: dict[str, Signature] = {}
        self.kept: OrderedDict[str, bytes] = OrderedDict()  # packed, least recently seen first

    def loaded_now(self, name: str, signature: Signature | None) -> None:
        self.kept.pop(name, None)
        if signature is not None:
            self.loaded[name] = signature

    def left(self, name: str) -> None:
        signature = self.loaded.pop(name, None)
        if signature is not None:
            self.kept[name] = msgspec.msgpack.encode(signature)  # packed: smaller than the structs
            if len(self.kept) > self.max_kept:
                self.kept.popitem(last=False)

    def forget(self, name: str) -> None:
        """Its artifact changed: only a load tells the new signature."""
        self.kept.pop(name, None)

    def of(self, name: str) -> Signature | None:
        signature = self.loaded.get(name)
        if signature is None and name in self.kept:
            self.kept.move_to_end(name)
            signature = msgspec.msgpack.decode(self.kept[name], type=Signature)
        return signature
