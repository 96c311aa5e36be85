"""What batch transform and AWS's built-in algorithm examples ask of a container, on a real
server: `GET /execution-parameters`, and the XGBoost example's `xgboost-model` artifact."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.RunningServer]:
    root = tmp_path_factory.mktemp("algorithms")
    (root / "store").mkdir()
    args = testing.serve_args(
        root / "store", root / "cache", workers=2, max_request_size="20MiB"
    )
    with testing.RunningServer(args, root) as running:
        yield running


@pytest.fixture
def http(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        yield client


def test_execution_parameters_answer_as_the_algorithm_containers(http: httpx.Client) -> None:
    """Batch transform asks GET /execution-parameters for its defaults; the scikit-learn and
    XGBoost containers answer the workers, MULTI_RECORD and the largest body in MiB."""
    response = http.get("/execution-parameters")
    assert response.status_code == 200, response.text
    assert response.json() == {
        "MaxConcurrentTransforms": 2,
        "BatchStrategy": "MULTI_RECORD",
        "MaxPayloadInMB": 20,
    }
