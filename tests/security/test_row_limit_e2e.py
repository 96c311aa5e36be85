"""Rows per request are bounded before the model predicts: a 6 MiB CSV of iris rows would
otherwise become tens of megabytes of `predict_proba` JSON in the worker (times a batch)."""

from __future__ import annotations

import json

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

LIMIT = 5


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory, serve: object) -> str:
    store = tmp_path_factory.mktemp("rows-store")
    testing.iris_logreg(store / "iris.joblib")
    return serve(store, workers=1, max_rows_per_request=LIMIT).url  # type: ignore[operator]


def test_max_rows_per_request_is_413(url: str) -> None:
    """A request over `--max-rows-per-request` is 413 before predicting."""
    rows = testing.iris_rows(LIMIT + 1)
    with httpx.Client(base_url=url, timeout=30) as client:
        fits = client.post("/models/iris.joblib/invoke", json=rows[:LIMIT])
        assert fits.status_code == 200 and len(fits.json()["predictions"]) == LIMIT
        for body, content_type in (
            (json.dumps(rows), "application/json"),
            ("\n".join(",".join(map(str, row)) for row in rows), "text/csv"),
        ):
            over = client.post(
                "/models/iris.joblib/invoke", content=body, headers={"content-type": content_type}
            )
            assert over.status_code == 413, over.text
            assert over.json()["type"] == "PayloadTooLarge"
            message = over.json()["message"]
            assert f"{LIMIT + 1} rows" in message and "--max-rows-per-request" in message
        oip = {
            "inputs": [
                {
                    "name": "x",
                    "shape": [LIMIT + 1, 4],
                    "datatype": "FP64",
                    "data": [v for row in rows for v in row],
                }
            ]
        }
        assert client.post("/v2/models/iris.joblib/infer", json=oip).status_code == 413
        assert client.post("/models/iris.joblib/invoke", json=rows[:1]).status_code == 200
