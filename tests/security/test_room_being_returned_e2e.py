"""A cold load that arrives while memory is being given back waits for it instead of answering 507.

Eight concurrent 6 MiB one-row bodies leave the workers holding freed heap until the memory watch
trims it or recycles a worker. A cold load sent at once, before that settles, found its room
taken and answered 507 in some runs: it now waits for the room, within its deadline.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from test_large_bodies_e2e import BODIES, BODY_BYTES, send_together, wide_row

from modelhost import testing

pytestmark = pytest.mark.e2e

# room for models beside the idle server, less than the bodies' heap takes until it is returned
SETTINGS = {"workers": 2, "threads_per_worker": 4, "memory_budget": "352MiB"}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "iris.joblib")
    testing.iris_logreg(root / "cold.joblib")
    return root


def test_a_cold_load_right_after_large_bodies_is_served(store: Path, tmp_path: Path) -> None:
    args = testing.serve_args(store, tmp_path / "cache", **SETTINGS)
    with testing.RunningServer(args, tmp_path) as server, httpx.Client(timeout=300) as client:
        invoke = f"{server.url}/models/iris.joblib/invoke"
        assert client.post(invoke, json=testing.iris_rows(1)).status_code == 200
        send_together(invoke, wide_row(BODY_BYTES), BODIES)
        cold = client.post(f"{server.url}/models/cold.joblib/invoke", json=testing.iris_rows(1))
        assert cold.status_code == 200, cold.text
