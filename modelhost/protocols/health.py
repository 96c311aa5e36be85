"""Whether the server takes requests, as /ping and gRPC's health calls say it."""

from __future__ import annotations

from collections.abc import Callable

from modelhost.host import ModelHost, State


class Health:
    """Ready once serving and until closing; healthy while every worker runs too.

    A server of one model (SageMaker's single-model mode) is healthy only once that model has
    loaded, so no traffic reaches it before it can answer; after that, a lost worker says so.
    """

    def __init__(self, host: ModelHost, single_model: str = "") -> None:
        self.host = host
        self.single_model = single_model  # "": many models
        self.single_model_loaded = False
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
        if not self._single_model_has_loaded():
            return False, self._not_loaded()
        running, configured = self.worker_counts()
        if running >= configured:
            return self.ready, ""
        return False, (
            f"{running} of {configured} workers running; replacements are being started "
            "(see worker_exit events on GET /events)"
        )

    def _not_loaded(self) -> str:
        """Why the single model is not serving: its load's failure, or a load still to come."""
        failed = self.host.failed_load(self.single_model)
        if failed is not None:
            return (
                f"model {self.single_model} failed to load: {failed}; replace the "
                "artifact: the next invocation loads it again, and /ping answers 200 once it has"
            )
        return (
            f"model {self.single_model} has not loaded yet; /ping answers 200 once it has "
            "(see the load and failure events on GET /events)"
        )

    def _single_model_has_loaded(self) -> bool:
        if not self.single_model_loaded and self.single_model:
            self.single_model_loaded = self.host.state_of(self.single_model) is State.LOADED
        return self.single_model_loaded or not self.single_model
