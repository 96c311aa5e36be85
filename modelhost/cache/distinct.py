"""The bytes of distinct names a run of requests holds, expected from the reuse times seen.

Of n requests in a row, one is its name's last in the run when the name's next use is more
than its remaining requests away. Next uses lie, on average, as far as last uses, so the run
holds E[size × min(reuse time, n)] bytes of distinct names, a first use's reuse time being
infinite (StatStack, Eklov and Hagersten 2010, weighted by bytes).
"""

from __future__ import annotations

import math

BINS_PER_DOUBLING = 8  # reuse times under 16 requests each have a bin of their own
BINS = 48 * BINS_PER_DOUBLING
HALVE_AFTER = 8192  # uses: older ones count half, so the estimate follows the traffic
REFRESH_EVERY = 256  # uses between rebuilds of the running sums, once there are as many


def bin_of(reuse_time: int) -> int:
    index = int(math.log2(reuse_time) * BINS_PER_DOUBLING)
    return index if index < BINS else BINS - 1


class DistinctBytes:
    """Fed each sampled use's size and reuse time; reads a run's expected distinct bytes."""

    def __init__(self, halve_after: float = HALVE_AFTER, refresh_every: int = REFRESH_EVERY):
        self.halve_after, self.refresh_every = halve_after, refresh_every
        self.bytes = [0.0] * BINS  # by the bin of the reuse time
        self.byte_requests = [0.0] * BINS  # size × reuse time
        self.first_bytes = 0.0
        self.uses = 0.0
        self.mean_size = 0.0  # of a use, as of the last rebuild
        self._since = 0
        # a use's share, as of the last rebuild
        self._before = [0.0] * BINS  # of byte_requests in the bins below
        self._after = [0.0] * BINS  # of bytes in the bins above, and of first uses

    def add(self, size: int, reuse_time: float) -> None:
        """A use `reuse_time` requests after its name's last (infinity: a first use)."""
        if reuse_time == math.inf:
            self.first_bytes += size
        else:
            index = bin_of(int(reuse_time))
            self.bytes[index] += size
            self.byte_requests[index] += size * reuse_time
        self.uses += 1
        self._since += 1
        if self._since >= min(self.refresh_every, self.uses - self._since):  # 1, 2, 4, ... uses
            self._refresh()

    def expected_in(self, requests: int) -> float:
        """Bytes of the distinct names among `requests` in a row; 0 before any use."""
        if requests < 1 or not self.uses:
            return 0.0
        index = bin_of(requests)
        inside = min(self.byte_requests[index], requests * self.bytes[index]) / self.uses
        return self._before[index] + inside + requests * self._after[index]

    def _refresh(self) -> None:
        if self.uses > self.halve_after:
            for column in (self.bytes, self.byte_requests):
                column[:] = [value / 2 for value in column]
            self.first_bytes, self.uses = self.first_bytes / 2, self.uses / 2
        before, after = 0.0, self.first_bytes / self.uses
        for index in range(BINS):
            self._before[index] = before
            before += self.byte_requests[index] / self.uses
        for index in range(BINS - 1, -1, -1):
            self._after[index] = after
            after += self.bytes[index] / self.uses
        self.mean_size, self._since = after, 0
