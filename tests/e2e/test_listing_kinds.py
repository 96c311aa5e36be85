"""A server's model lists name every kind of model its store holds, before any is used: Triton's
repository index and KServe v1's `GET /v1/models` against a real server on loopback."""

from __future__ import annotations

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing
from modelhost.testing.hf_models import hf_classifier

pytestmark = pytest.mark.e2e

ONNX = "vision/iris.onnx"
HF = "text/bert"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, serve: Servers) -> testing.RunningServer:
    root = tmp_path_factory.mktemp("kinds-store")
    testing.iris_logreg(root / "a.joblib")
    testing.onnx_iris(root / ONNX)
    hf_classifier(root / HF)
    testing.sagemaker_folder(root / "sm")
    (root / "notes").mkdir()
    (root / "notes/readme.txt").write_text("not a model")
    return serve(root, workers=1)


def test_the_repository_index_names_unused_onnx_files_and_hugging_face_folders(
    server: testing.RunningServer,
) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        index = http.post("/v2/repository/index", json={}).json()
    assert [entry["name"] for entry in index] == ["a.joblib", "sm", HF, ONNX]


def test_kserve_v1_lists_them_too(server: testing.RunningServer) -> None:
    with httpx.Client(base_url=server.url, timeout=30) as http:
        models = http.get("/v1/models").json()["models"]
    assert {ONNX, HF} <= set(models)
