"""Requests waiting for a model's load: bounded by model and, with tenants on, by tenant.

A request refused here is told to come back when the load should be done: the loads waited
for so far, less how long this one has run.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Callable, Iterator

from modelhost.errors import QueueFull, TenantQueueFull
from modelhost.host.calls import LoadOutcome

SMOOTHING = 0.2  # weight of the newest load in the running mean


class LoadWaits:
    """Who waits for which load, and how long loads take."""

    def __init__(self, limit: int, by_tenant: bool, clock: Callable[[], float]) -> None:
        self.limit, self.by_tenant, self.clock = limit, by_tenant, clock
        self._models: Counter[str] = Counter()
        self._tenants: Counter[str] = Counter()
        self._since: dict[str, float] = {}  # when the model's first waiter came
        self._mean_s: float | None = None

    @contextlib.contextmanager
    def waiting(self, name: str, tenant: str) -> Iterator[None]:
        """One request waits for `name`'s load, or is refused when too many already do."""
        self._check(name, tenant)
        self._since.setdefault(name, self.clock())
        self._models[name] += 1
        self._tenants[tenant] += 1
        try:
            yield
        finally:
            self._leave(name, tenant)

    def loaded(self, outcome: LoadOutcome) -> None:
        """A load ended that requests waited for: learn how long loads take."""
        seconds = (outcome.download_ms + outcome.load_ms) / 1000
        mean = self._mean_s
        self._mean_s = seconds if mean is None else mean + SMOOTHING * (seconds - mean)

    def retry_after_s(self, name: str) -> int:
        """Whole seconds until `name`'s load should be done; at least one."""
        if self._mean_s is None:
            return 1
        ran_s = self.clock() - self._since[name] if name in self._since else 0.0
        return max(1, math.ceil(self._mean_s - ran_s))

    def _check(self, name: str, tenant: str) -> None:
        if self._models[name] >= self.limit:
            error: QueueFull = QueueFull(
                f"model {name} is loading and {self._models[name]} requests wait for its load, "
                f"the limit (job_queue_size) is {self.limit}; retry once it has loaded, or "
                "raise --job-queue-size"
            )
        elif self.by_tenant and self._tenants[tenant] >= self.limit:
            error = TenantQueueFull(
                f"tenant {tenant} has {self._tenants[tenant]} requests waiting for models to "
                f"load, the limit (job_queue_size) is {self.limit}; retry once they have "
                "loaded, or raise --job-queue-size"
            )
        else:
            return
        error.retry_after_s = self.retry_after_s(name)
        raise error

    def _leave(self, name: str, tenant: str) -> None:
        for counts, key in ((self._models, name), (self._tenants, tenant)):
            counts[key] -= 1
            if not counts[key]:
                del counts[key]
        if name not in self._models:
            del self._since[name]
