"""Health as /ping tells it: ready once serving; in SageMaker's single-model mode, once the one
model has loaded (sagemaker-inference-toolkit#138)."""

from __future__ import annotations

from typing import Any, cast

from modelhost.cache.memory import State
from modelhost.host import ModelHost
from modelhost.protocols.health import Health


class Host:
    """The three things Health reads of a host."""

    def __init__(self) -> None:
        self.closing = False
        self.states: dict[str, State] = {}
        self.failures: dict[str, str] = {}

    def state_of(self, name: str) -> State | None:
        return self.states.get(name)

    def failed_load(self, name: str) -> str | None:
        return self.failures.get(name)


def health_of(host: Host, single_model: str = "") -> Health:
    health = Health(cast(ModelHost, cast(Any, host)), single_model)
    health.serve(lambda: (1, 1))
    return health


def test_many_models_are_healthy_once_serving() -> None:
    assert health_of(Host()).check() == (True, "")


def test_one_model_is_healthy_once_it_has_loaded() -> None:
    """Not while loading nor after a failed load; then for good, as a worker's loss says itself."""
    host = Host()
    health = health_of(host, "model")
    unloaded, reason = health.check()
    assert not unloaded and "model model has not loaded" in reason
    host.states["model"] = State.LOADING
    assert not health.healthy()
    host.states.pop("model")
    host.failures["model"] = "model.joblib is not a model"
    failed, reason = health.check()
    assert not failed and "failed to load: model.joblib is not a model" in reason
    host.failures.clear()
    host.states["model"] = State.LOADED
    assert health.check() == (True, "")
    del host.states["model"]  # its worker died: it loads again on its next request
    assert health.healthy()
