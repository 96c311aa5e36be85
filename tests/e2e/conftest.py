"""A real store of real models, and real servers (frontend, template, workers) on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import tritonclient.grpc as triton_grpc
import tritonclient.http as triton_http
from helpers.archives import symlink_tar, tar_bomb, traversal_tar
from helpers.serving import Servers

from modelhost import testing

TENANTS = 6


@pytest.fixture(scope="session")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    for tenant in range(TENANTS):
        testing.iris_logreg(root / f"tenants/t{tenant:03d}.joblib")
    testing.iris_logreg(root / "iris.pkl")
    testing.corrupt_artifact(root / "broken/corrupt.joblib")
    testing.slow_handler_folder(root / "slow")
    testing.mms_handler_folder(root / "custom/mms")
    testing.sagemaker_folder(root / "custom/sagemaker")
    testing.tar_gz_of(testing.mms_handler_folder(root / ".src/tar"), root / "archives/m.tar.gz")
    testing.zip_of(testing.sagemaker_folder(root / ".src/zip"), root / "archives/m.zip")
    traversal_tar(root / "hostile/traversal.tar.gz")
    symlink_tar(root / "hostile/symlink.tar.gz")
    tar_bomb(root / "hostile/bomb.tar.gz", unpacked_bytes=64 * 2**20)
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(
        store,
        workers=2,
        memory_budget="4GiB",
        max_unpacked_bytes="16MiB",
        max_request_size="1MiB",
    )


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    # past the server's 60 s response timeout: a request stuck there is a 504 saying where
    with httpx.Client(base_url=server.url, timeout=75) as http:
        yield http


@pytest.fixture(scope="session")
def iris_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of iris alone, for the tests of Triton's clients that define their `server` on it."""
    root = tmp_path_factory.mktemp("iris-store")
    testing.iris_logreg(root / "iris.joblib")
    return root


@pytest.fixture(scope="module")
def grpc_port() -> int:
    return testing.free_port()


@pytest.fixture(params=("http", "grpc"))
def oip(
    request: pytest.FixtureRequest, server: testing.RunningServer, grpc_port: int
) -> Iterator[Any]:
    """tritonclient's REST client, then its gRPC one, to the module's `server` on `grpc_port`."""
    if request.param == "http":
        client: Any = triton_http.InferenceServerClient(server.url.removeprefix("http://"))
    else:
        client = triton_grpc.InferenceServerClient(f"127.0.0.1:{grpc_port}")
    yield client
    client.close()
