"""The doorkeeper of TinyLFU (Einziger et al. 2017): a Bloom filter of the names seen since it was
last cleared, so that state is kept only for names seen twice. Fast copies use it: a copy is
written at a name's second load, and a scan of one-off loads writes none.

Fixed memory whatever the number of names: it forgets every name at once when `capacity` new
names were recorded, while its false positives are still rare (a false "seen" only writes a copy
one load early)."""

from __future__ import annotations

import hashlib

HASHES = 3  # with `bits` = 8 × capacity, a false positive rate near 3% at capacity


class Doorkeeper:
    """Whether a name was seen before, in `bits` / 8 bytes."""

    def __init__(self, bits: int = 1 << 20, capacity: int = 1 << 17) -> None:
        self.size, self.capacity = bits, capacity
        self.bits = bytearray(bits // 8)
        self.recorded = 0

    def seen(self, name: str) -> bool:
        """True if `name` was seen since the filter was last cleared; else record it."""
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
