"""TorchServe's HTTPS collection (test/postman/https_test_collection.json), mirrored: one test per
request, named after it, with its expectations, against a real server on loopback that speaks
TLS with a certificate made here, on its inference and management ports. An archive of our own
stands in for the collection's squeezenet1_1.mar. Requests left out, and why:
docs/conformance/torchserve-https.md."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.tls import self_signed

from modelhost import testing

pytestmark = pytest.mark.e2e

HANDLER = """
def handle(data, context):
    if data is None:
        return None
    return [{"bytes": len(row.get("data") or row.get("body") or b"")} for row in data]
"""
IMAGE = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 64  # stands in for kitten.jpg
MODEL = "squeezenet1_1"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ts-https-store")
    source = root / ".src/squeezenet"
    source.mkdir(parents=True)
    (source / "handler.py").write_text(HANDLER)
    testing.mar_of(source, root / f"{MODEL}.mar")
    return root


@pytest.fixture(scope="module")
def tls_server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[testing.RunningServer, dict[str, int], ssl.SSLContext]]:
    """The server on HTTPS (its inference port), its management and metrics ports, a context
    trusting it."""
    work = tmp_path_factory.mktemp("ts-https")
    cert, key = self_signed(work)
    trusted = ssl.create_default_context(cafile=str(cert))
    ports = {"management": testing.free_port(), "metrics": testing.free_port()}
    args = testing.serve_args(
        store,
        work / "cache",
        workers=1,
        memory_budget="4GiB",
        management_port=ports["management"],
        metrics_port=ports["metrics"],
        ssl_certfile=cert,
        ssl_keyfile=key,
    )
    with testing.RunningServer(args, work, tls=trusted) as server:
        yield server, ports, trusted


@pytest.fixture
def inference(
    tls_server: tuple[testing.RunningServer, dict[str, int], ssl.SSLContext],
) -> Iterator[httpx.Client]:
    server, _, trusted = tls_server
    with httpx.Client(base_url=server.url, verify=trusted, timeout=60) as http:
        yield http


@pytest.fixture
def management(
    tls_server: tuple[testing.RunningServer, dict[str, int], ssl.SSLContext],
) -> Iterator[httpx.Client]:
    yield from client_of(tls_server, "management")


@pytest.fixture
def metrics(
    tls_server: tuple[testing.RunningServer, dict[str, int], ssl.SSLContext],
) -> Iterator[httpx.Client]:
    yield from client_of(tls_server, "metrics")


def client_of(
    tls_server: tuple[testing.RunningServer, dict[str, int], ssl.SSLContext], port: str
) -> Iterator[httpx.Client]:
    _, ports, trusted = tls_server
    url = f"https://127.0.0.1:{ports[port]}"
    with httpx.Client(base_url=url, verify=trusted, timeout=60) as http:
        yield http


def registered(management: httpx.Client) -> None:
    """The model the later requests use, registered as the collection's register call does."""
    if management.get(f"/models/{MODEL}").status_code == 404:
        assert register(management).status_code == 200


def register(management: httpx.Client) -> httpx.Response:
    params = {"url": f"{MODEL}.mar", "model_name": MODEL, "initial_workers": "1"}
    return management.post("/models", params={**params, "synchronous": "true"})


def test_https_inference_api_description(inference: httpx.Client) -> None:
    assert inference.options("/").status_code == 200


def test_https_management_api_description(management: httpx.Client) -> None:
    assert management.options("/").status_code == 200


def test_https_metrics_api_description(metrics: httpx.Client) -> None:
    response = metrics.options("/")
    assert response.status_code == 200
    assert "/metrics" in response.json()["paths"]


def test_https_register_model_squeezenet(management: httpx.Client) -> None:
    management.delete(f"/models/{MODEL}")  # registered by an earlier test, or not at all
    response = register(management)
    assert response.status_code in (200,), response.text


def test_https_get_squeezenet_model_description(management: httpx.Client) -> None:
    registered(management)
    response = management.get(f"/models/{MODEL}")
    assert response.status_code in (200,), response.text


@pytest.mark.parametrize("synchronous", ["true", "false"], ids=["synchronous", "asynchronous"])
def test_https_scale_up_workers(management: httpx.Client, synchronous: str) -> None:
    """ "HTTPS Scale up Workers - Synchronous" and "- Asynchronous"."""
    registered(management)
    params = {"min_worker": "1", "max_worker": "1", "synchronous": synchronous}
    response = management.put(f"/models/{MODEL}", params=params)
    assert response.status_code in (200, 201, 202), response.text


def test_https_inference_squeezenet(management: httpx.Client, inference: httpx.Client) -> None:
    registered(management)
    response = inference.post(f"/predictions/{MODEL}", content=IMAGE)
    assert response.status_code == 200, response.text
    assert response.json() == {"bytes": len(IMAGE)}


def test_https_unregister_model_squeezenet(management: httpx.Client) -> None:
    registered(management)
    response = management.delete(f"/models/{MODEL}")
    assert response.status_code in (200,), response.text
