"""TorchServe's model snapshot, the `model_snapshot` of its snapshot .cfg files: the models it
registers at start, read as the registrations that made them."""

from __future__ import annotations

import json
import re
from typing import Any

from modelhost.errors import ConfigError

# the snapshot's fields and the registration parameters they came from
_PARAMS = {
    "batchSize": "batch_size",
    "maxBatchDelay": "max_batch_delay",
    "responseTimeout": "response_timeout",
    "startupTimeout": "startup_timeout",
}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f"}


def snapshot_registrations(text: str) -> list[dict[str, str]]:
    """A registration per model version, each model's default version first."""
    models = _models(text)
    registrations = []
    for name, versions in models.items():
        states = sorted(versions.values(), key=lambda state: not state.get("defaultVersion"))
        registrations += [_registration(name, state) for state in states]
    return registrations


def _models(text: str) -> dict[str, dict[str, dict[str, Any]]]:
    """The snapshot's models by name and version, its .properties escapes (`\\:`) undone."""
    unescaped = re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), text)
    try:
        snapshot = json.loads(unescaped)
        models = snapshot["models"]
        if all(isinstance(v, dict) and "marName" in s for v in models.values() for s in v.values()):
            return models  # type: ignore[no-any-return]
    except (ValueError, TypeError, KeyError, AttributeError):
        pass
    raise ConfigError(
        "model_snapshot is not a TorchServe snapshot: expected JSON such as "
        '{"models": {"NAME": {"VERSION": {"marName": "NAME.mar", "minWorkers": 1, ...}}}}; '
        "copy it from the snapshot .cfg file as TorchServe wrote it, or remove it"
    )


def _registration(name: str, state: dict[str, Any]) -> dict[str, str]:
    """The registration parameters that give `name` this version's state."""
    params = {"model_name": name, "url": str(state["marName"]), "synchronous": "true"}
    params["initial_workers"] = str(state.get("minWorkers", 1))
    return params | {p: str(state[f]) for f, p in _PARAMS.items() if state.get(f) is not None}
