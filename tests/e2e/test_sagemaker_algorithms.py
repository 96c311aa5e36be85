"""What batch transform and AWS's built-in algorithm examples ask of a container, on a real
server: `GET /execution-parameters`, and the XGBoost example's `xgboost-model` artifact."""

from __future__ import annotations

import os
import pickle
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

CSV_ROW = ",".join(str(value) for value in testing.iris_rows(1)[0])


class Planted:
    """Unpickled, it makes the folder `marker`: what a hostile pickle could do, harmlessly."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return os.mkdir, (str(self.marker),)


def xgboost_model_tar_gz(store: Path, name: str, saved_as: str) -> None:
    """model.tar.gz as the XGBoost algorithm leaves it: one file, `xgboost-model`."""
    folder = store.parent / "sources" / name
    booster = testing.xgboost_iris(
        folder / f"booster.{saved_as if saved_as != 'pickle' else 'ubj'}"
    )
    model = folder / "xgboost-model"
    if saved_as == "pickle":
        import xgboost

        loaded = xgboost.Booster(model_file=str(booster))
        model.write_bytes(pickle.dumps(loaded))
    else:
        booster.rename(model)
    booster.unlink(missing_ok=True)
    testing.tar_gz_of(folder, store / f"{name}.tar.gz")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[testing.RunningServer]:
    root = tmp_path_factory.mktemp("algorithms")
    for saved_as in ("ubj", "json", "pickle"):
        xgboost_model_tar_gz(root / "store", f"xgb-{saved_as}", saved_as)
    args = testing.serve_args(root / "store", root / "cache", workers=2, max_request_size="20MiB")
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


@pytest.mark.parametrize("saved_as", ["ubj", "json", "pickle"])
def test_xgboost_model_file_loads_with_the_xgboost_handler(
    http: httpx.Client, saved_as: str
) -> None:
    """The XGBoost multi-model example's model.tar.gz holds `xgboost-model`, no extension:
    a booster saved by save_model (UBJ, JSON) or a pickle of one, as the container reads it."""
    headers = {"content-type": "text/csv", "accept": "application/json"}
    response = http.post(f"/models/xgb-{saved_as}.tar.gz/invoke", content=CSV_ROW, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"predictions": [0]}


def test_pickled_xgboost_model_is_refused_under_refuse_pickle(tmp_path: Path) -> None:
    """`xgboost-model` names no format: under --refuse-pickle a pickle in it is refused as it
    is read, before it can run anything."""
    store = tmp_path / "store"
    (store / "sources" / "planted").mkdir(parents=True)
    marker = tmp_path / "ran"
    (store / "sources" / "planted" / "xgboost-model").write_bytes(pickle.dumps(Planted(marker)))
    testing.tar_gz_of(store / "sources" / "planted", store / "planted.tar.gz")
    args = [*testing.serve_args(store, tmp_path / "cache", workers=1), "--refuse-pickle"]
    with (
        testing.RunningServer(args, tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=60) as client,
    ):
        response = client.post(
            "/models/planted.tar.gz/invoke", content=CSV_ROW, headers={"content-type": "text/csv"}
        )
    assert response.status_code != 200, response.text
    assert "refuses pickles" in response.json()["message"]
    assert not marker.exists()
