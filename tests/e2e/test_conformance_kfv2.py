"""TorchServe's KServe v2 Postman collections (`test/postman/kfv2_api_test_collection.json` with
`kfv2_inference_data.json`, and `kfv2_https_test_collection.json` in pytorch/serve), mirrored:
one test per request, named after it, making the same call with the same expectation, against
a real modelhost on loopback (plain HTTP, then HTTPS on all three ports).

Their model is TorchServe's MNIST example; ours is a digit classifier of the same shape, a
TorchServe-style handler class in a `.mar` built with torch-model-archiver, trained here on
scikit-learn's digits drawn at MNIST's size. The requests they make that are out of scope are
listed, with the reason, in docs/conformance/kfv2.md.
"""

from __future__ import annotations

import json
import ssl
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from helpers.serving import Servers
from helpers.tls import self_signed
from sklearn.datasets import load_digits
from sklearn.neighbors import NearestCentroid

from modelhost import testing

REQUEST_ID = "d3b15cad-50a2-4eaf-80ce-8b0a428bd298"  # the id of TorchServe's request file
DIGIT = 1  # the digit of the image sent, and so of the expected answer

HANDLER = '''"""A TorchServe-style digit classifier: the inputs TorchServe's KServe v2
envelope hands it, one [1, 28, 28] image each, to one digit each."""

import os

import joblib
import numpy as np


class DigitClassifier:
    def initialize(self, context):
        model_dir = context.system_properties["model_dir"]
        self.model = joblib.load(os.path.join(model_dir, "model.joblib"))

    def preprocess(self, data):
        images = [np.asarray(row.get("data") or row.get("body"), dtype=float) for row in data]
        return np.stack([image.reshape(-1) for image in images])

    def inference(self, rows):
        return self.model.predict(rows)

    def postprocess(self, digits):
        return digits.tolist()
'''


def mnist_sized(images: np.ndarray) -> np.ndarray:
    """8x8 digits in 0..16 as MNIST's 28x28 in [0, 1]: each pixel 3x3, a 2-pixel margin."""
    big = np.kron(images / 16.0, np.ones((3, 3)))
    return np.pad(big, ((0, 0), (2, 2), (2, 2)))


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    data = load_digits()
    return mnist_sized(data.images), data.target


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, digits: tuple[np.ndarray, np.ndarray]) -> Path:
    """A store holding `mnist.mar`, as TorchServe's environment names the model's url."""
    images, labels = digits
    folder = tmp_path_factory.mktemp("mnist-src")
    # a classifier fitted at once: the tests need it to tell the one digit sent, no more
    with warnings.catch_warnings():  # the margin's pixels are 0 in every image, by design
        warnings.filterwarnings("ignore", "self.within_class_std_dev_", UserWarning)
        model = NearestCentroid().fit(images.reshape(len(images), -1), labels)
    testing.dump(model, folder / "model.joblib")
    (folder / "handler.py").write_text(HANDLER)
    root = tmp_path_factory.mktemp("kfv2-store")
    testing.mar_of(folder, root / "mnist.mar", serialized_file="model.joblib")
    return root


@pytest.fixture(scope="module")
def request_file(digits: tuple[np.ndarray, np.ndarray]) -> bytes:
    """Our `mnist_v2_tensor.json`: one FP32 image of shape [1, 28, 28], nested, with an id."""
    images, labels = digits
    image = images[int(np.flatnonzero(labels == DIGIT)[0])]
    tensor = {"name": "input-0", "shape": [1, 28, 28], "datatype": "FP32", "data": [image.tolist()]}
    return json.dumps({"id": REQUEST_ID, "inputs": [tensor]}).encode()


# the data file's "expected", for our digit
EXPECTED = {
    "id": REQUEST_ID,
    "model_name": "mnist",
    "model_version": "1.0",
    "outputs": [{"name": "input-0", "shape": [1], "datatype": "INT64", "data": [DIGIT]}],
}
Pair = tuple[httpx.Client, httpx.Client]  # the inference and management ports' clients
REGISTER = {"url": "mnist.mar", "model_name": "mnist", "initial_workers": 1, "synchronous": "true"}


class Ports:
    """The addresses of one server's inference, management and metrics ports."""

    def __init__(self, scheme: str, ports: tuple[int, int, int], verify: Any) -> None:
        self.urls = [f"{scheme}://127.0.0.1:{port}" for port in ports]
        self.verify = verify

    def client(self, which: int) -> httpx.Client:
        return httpx.Client(base_url=self.urls[which], verify=self.verify, timeout=60)


def ports_of(server: testing.RunningServer, management: int, metrics: int, verify: Any) -> Ports:
    scheme = "https" if server.tls else "http"
    return Ports(scheme, (server.port, management, metrics), verify)


@pytest.fixture(scope="module")
def plain(store: Path, serve: Servers) -> Ports:
    management, metrics = testing.free_port(), testing.free_port()
    server = serve(store, workers=1, management_port=management, metrics_port=metrics)
    return ports_of(server, management, metrics, True)


@pytest.fixture(scope="module")
def secure(store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ports]:
    """TorchServe's config_kfv2.properties: https on the inference, management and metrics
    addresses, with one certificate."""
    work = tmp_path_factory.mktemp("kfv2-https")
    cert, key = self_signed(work)
    trusted = ssl.create_default_context(cafile=str(cert))
    management, metrics = testing.free_port(), testing.free_port()
    args = testing.serve_args(
        store,
        work / "cache",
        workers=1,
        management_port=management,
        metrics_port=metrics,
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    with testing.RunningServer(args, work, tls=trusted) as server:
        yield ports_of(server, management, metrics, trusted)


def register(management: httpx.Client) -> httpx.Response:
    return management.post("/models", params=REGISTER)


@pytest.fixture
def inference(plain: Ports) -> Iterator[httpx.Client]:
    with plain.client(0) as client:
        yield client


@pytest.fixture
def management(plain: Ports) -> Iterator[httpx.Client]:
    with plain.client(1) as client:
        yield client
        client.delete("/models/mnist")  # each test leaves the server as it found it


@pytest.fixture
def registered(management: httpx.Client) -> httpx.Client:
    assert register(management).status_code == 200
    return management


# kfv2_api_test_collection.json ------------------------------------------------------------------


def test_model_zoo_register_model(management: httpx.Client) -> None:
    assert register(management).status_code == 200


def test_model_zoo_inference_model(
    registered: httpx.Client, inference: httpx.Client, request_file: bytes
) -> None:
    """The body is the request file as is, sent without a Content-Type (Postman's file mode)."""
    response = inference.post("/v2/models/mnist/infer", content=request_file)
    assert response.status_code == 200, response.text
    assert response.json() == EXPECTED


def test_model_zoo_unregister_model(registered: httpx.Client) -> None:
    assert registered.delete("/models/mnist").status_code in (200, 201, 202)


# kfv2_https_test_collection.json ----------------------------------------------------------------


@pytest.fixture
def https(secure: Ports) -> Iterator[Pair]:
    with secure.client(0) as main, secure.client(1) as manage:
        yield main, manage
        manage.delete("/models/mnist")


@pytest.fixture
def https_metrics(secure: Ports) -> Iterator[httpx.Client]:
    with secure.client(2) as client:
        yield client


@pytest.fixture
def https_registered(https: Pair) -> Pair:
    assert register(https[1]).status_code == 200
    return https


def test_https_inference_api_description(https: Pair) -> None:
    assert https[0].options("/").status_code == 200


def test_https_management_api_description(https: Pair) -> None:
    assert https[1].options("/").status_code == 200


def test_https_metrics_api_description(https_metrics: httpx.Client) -> None:
    assert https_metrics.options("/").status_code == 200


def test_https_register_model_mnist(https: Pair) -> None:
    assert register(https[1]).status_code == 200


def test_https_get_mnist_model_description(https_registered: Pair) -> None:
    assert https_registered[1].get("/models/mnist").status_code == 200


def test_https_scale_up_workers_synchronous_for_mnist(https_registered: Pair) -> None:
    params = {"min_worker": 5, "max_worker": 5, "synchronous": "true"}
    response = https_registered[1].put("/models/mnist", params=params)
    assert response.status_code in (200, 201, 202), response.text


def test_https_scale_up_workers_asynchronous_for_mnist(https_registered: Pair) -> None:
    params = {"min_worker": 6, "max_worker": 6, "synchronous": "false"}
    response = https_registered[1].put("/models/mnist", params=params)
    assert response.status_code in (200, 201, 202), response.text


def test_https_inference_mnist_kf(https_registered: Pair, request_file: bytes) -> None:
    response = https_registered[0].post("/v2/models/mnist/infer", content=request_file)
    assert response.status_code == 200, response.text


def test_https_unregister_model_mnist(https_registered: Pair) -> None:
    assert https_registered[1].delete("/models/mnist").status_code == 200
