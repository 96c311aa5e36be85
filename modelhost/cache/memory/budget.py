"""The memory budget less what no model explains: the idle server, its drift and the frontend.

The baseline is the server's measured PSS less the models' bytes. The headroom keeps room for
growth no reading has shown yet: the largest recent rise of the baseline, or a floor.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

DRIFT_READINGS = 32


@dataclass(frozen=True)
class FrontendAllowance:
    """The frontend's size at start and allowed growth, charged whole so no model pays."""

    start_bytes: int
    growth_bytes: int

    @property
    def bytes(self) -> int:
        return self.start_bytes + self.growth_bytes

    def charged(self, frontend_bytes: int) -> int:
        return max(frontend_bytes, self.bytes)


class MemoryBudget:
    """The budget, the baseline and headroom it keeps back, and the frontend's allowance."""

    def __init__(
        self,
        budget_bytes: int,
        baseline_bytes: int,
        *,
        drift_seed_bytes: int = 0,
        headroom_floor_bytes: int = 0,
        frontend: FrontendAllowance | None = None,
    ) -> None:
        self.budget_bytes = budget_bytes
        self.headroom_floor_bytes = headroom_floor_bytes
        self.frontend = frontend
        self.frontend_bytes = frontend.start_bytes if frontend else 0
        self.baseline_bytes = baseline_bytes + (frontend.growth_bytes if frontend else 0)
        self._idle_bytes = self.baseline_bytes
        self._drift: deque[int] = deque([drift_seed_bytes], maxlen=DRIFT_READINGS)
        self._recent_baselines: deque[int] = deque([self.baseline_bytes], maxlen=DRIFT_READINGS)

    @property
    def headroom_bytes(self) -> int:
        """Room left for growth no reading has shown yet: the largest recent rise, or the floor."""
        return max(self.headroom_floor_bytes, *self._drift)

    @property
    def learned_headroom_bytes(self) -> int:
        """The headroom beyond the floor, which readings move."""
        return self.headroom_bytes - self.headroom_floor_bytes

    @property
    def returned_baseline_bytes(self) -> int:
        """The baseline once memory being returned (trims, recycles) is back: the idle server's,
        and the frontend's growth past its allowance, which only a restart gives back."""
        return min(self.baseline_bytes, self._idle_bytes + self.frontend_excess_bytes)

    @property
    def capacity_bytes(self) -> int:
        """Room for models in an idle server, once memory being returned is back."""
        return self.budget_bytes - self.returned_baseline_bytes - self.headroom_floor_bytes

    @property
    def frontend_excess_bytes(self) -> int:
        return max(0, self.frontend_bytes - self.frontend.bytes) if self.frontend else 0

    def settle_frontend(self, frontend_bytes: int) -> None:
        """The frontend's size once serving is idle, not growth."""
        if self.frontend is None or frontend_bytes <= self.frontend.start_bytes:
            return
        grown = frontend_bytes - self.frontend.start_bytes
        self.frontend = FrontendAllowance(frontend_bytes, self.frontend.growth_bytes)
        self.frontend_bytes = frontend_bytes
        self.baseline_bytes += grown
        self._idle_bytes += grown
        self._recent_baselines.append(self.baseline_bytes)  # not drift to learn

    def charged_bytes(self, real_bytes: int, frontend_bytes: int | None) -> int:
        """A reading of the server with the frontend charged its whole allowance."""
        if frontend_bytes is None or self.frontend is None:
            return real_bytes
        self.frontend_bytes = frontend_bytes
        return real_bytes + self.frontend.charged(frontend_bytes) - frontend_bytes

    def fold(self, unexplained_bytes: int, settled: bool) -> None:
        """Take what the models do not explain as the baseline; while loads or unloads are under
        way, only as a rise, since a reading may have missed bytes that were leaving."""
        self._drift.append(max(0, unexplained_bytes - max(self._recent_baselines)))
        if settled:
            self.baseline_bytes = unexplained_bytes
        else:
            self.baseline_bytes = max(self.baseline_bytes, unexplained_bytes)
        self._recent_baselines.append(self.baseline_bytes)
