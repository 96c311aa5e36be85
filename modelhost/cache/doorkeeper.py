"""TinyLFU's doorkeeper: a Bloom filter of names seen, so fast copies wait for a second load.

It clears itself after `capacity` names, and a false "seen" only writes a copy early.
"""

from __future__ import annotations

import hashlib

HASHES = 3  # the best count for `bits` = 8 × capacity


class Doorkeeper:
    """Whether a name was seen before, in `bits` / 8 bytes."""

    def __init__(self, bits: int = 1 << 20, capacity: int = 1 << 17) -> None:
        self.size, self.capacity = bits, capacity
        self.bits = bytearray(bits // 8)
        self.recorded = 0

    def seen(self, name: str) -> bool:
        """Whether `name` was seen since the last clear; records it if not."""
        positions = self._positions(name)
        if all(self.bits[p >> 3] & (1 << (p & 7)) for p in positions):
            return True
        if self.recorded + 1 >= self.capacity:
            self.bits[:] = bytes(len(self.bits))
            self.recorded = 0
        for p in positions:
            self.bits[p >> 3] |= 1 << (p & 7)
        self.recorded += 1
        return False

    def _positions(self, name: str) -> list[int]:
        digest = hashlib.blake2b(name.encode(), digest_size=8).digest()
        first, step = int.from_bytes(digest[:4], "little"), int.from_bytes(digest[4:], "little")
        return [(first + i * (step | 1)) % self.size for i in range(HASHES)]
