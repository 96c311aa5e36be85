"""Whether the server takes requests, as /ping and gRPC's health calls say it."""

from __future__ import annotations

from collections.abc import Callable

from modelhost.host import ModelHost


class Health:
    """Ready once serving and until closing; healthy while every worker runs too."""

    def __init__(self, host: ModelHost) -> None:
        self.host = host
        self.serving = False
        # (running, configured); the composition root gives the pool's
        self.worker_counts: Callable[[], tuple[int, int]] = lambda: (1, 1)

    def serve(self, worker_counts: Callable[[], tuple[int, int]]) -> None:
        self.worker_counts = worker_counts
        self.serving = True

    @property
    def ready(self) -> bool:
        return self.serving and not self.host.closing

    def healthy(self) -> bool:
        return self.check()[0]

    def check(self) -> tuple[bool, str]:
        """Whether healthy, and why the workers make it not ("" while they do not)."""
        running, configured = self.worker_counts()
        if running >= configured:
            return self.ready, ""
        return False, (
            f"{running} of {configured} workers running; replacements are being started "
            "(see worker_exit events on GET /events)"
        )
