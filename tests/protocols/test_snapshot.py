"""TorchServe's model_snapshot read as the registrations that made it."""

from __future__ import annotations

import pytest

from modelhost.errors import ConfigError
from modelhost.protocols.snapshot import snapshot_registrations

# as TorchServe writes it in a snapshot .cfg (frontend/server/src/test/resources/snapshots)
WRITTEN = (
    '{\\n  "name"\\: "20200329045334828-startup.cfg",\\n  "modelCount"\\: 2,\\n  "models"\\: '
    '{\\n    "noop"\\: {\\n      "1.11"\\: {\\n        "defaultVersion"\\: false,\\n'
    '        "marName"\\: "noop-1.11.mar",\\n        "minWorkers"\\: 0,\\n'
    '        "maxWorkers"\\: 4\\n      },\\n      "1.0"\\: {\\n        "defaultVersion"\\: true,'
    '\\n        "marName"\\: "noop.mar",\\n        "minWorkers"\\: 4,\\n        "maxWorkers"\\: 4,'
    '\\n        "batchSize"\\: 2,\\n        "maxBatchDelay"\\: 100,\\n'
    '        "responseTimeout"\\: 120,\\n        "startupTimeout"\\: 120,\\n'
    '        "runtimeType"\\: "python"\\n      }\\n    }\\n  }\\n}'
)


def test_each_version_registers_the_default_first() -> None:
    """The default version registers first, so it is the default here too."""
    assert snapshot_registrations(WRITTEN) == [
        {
            "model_name": "noop",
            "url": "noop.mar",
            "synchronous": "true",
            "initial_workers": "4",
            "batch_size": "2",
            "max_batch_delay": "100",
            "response_timeout": "120",
            "startup_timeout": "120",
        },
        {
            "model_name": "noop",
            "url": "noop-1.11.mar",
            "synchronous": "true",
            "initial_workers": "0",
        },
    ]


def test_an_empty_snapshot_registers_nothing() -> None:
    assert snapshot_registrations('{"name": "s", "modelCount": 0, "models": {}}') == []


@pytest.mark.parametrize(
    "text", ["{", "[]", '{"models": []}', '{"models": {"m": {"1.0": {"minWorkers": 1}}}}']
)
def test_a_snapshot_of_another_shape_is_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="snapshot .cfg"):
        snapshot_registrations(text)
