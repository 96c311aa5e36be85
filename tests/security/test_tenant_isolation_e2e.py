"""Untrusted tenants apart from each other: a tenant's model that is a program cannot read
another tenant's model, in the store or in the cache, and two tenants' models never share a
sandboxed worker; a tenant finding every sandboxed worker held by others still gets one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from test_sandbox_e2e import ROWS, torch_file_reader

from modelhost import testing

pytestmark = pytest.mark.e2e

WORKERS = 2  # every one sandboxed, under --refuse-pickle


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The store, where tenant a's programs read tenant b's models; and the cache's folder."""
    store, scratch = tmp_path_factory.mktemp("store"), tmp_path_factory.mktemp("server")
    cache = scratch / "cache"
    testing.onnx_iris(store / "b/iris.onnx")  # read in place
    packed = testing.onnx_iris(tmp_path_factory.mktemp("packed") / "model.onnx")
    testing.tar_gz_of(packed.parent, store / "b/iris.tar.gz")  # unpacked into the cache
    testing.onnx_iris(store / "c/iris.onnx")
    cached = cache / "models/b%2Firis.tar.gz/model/model.onnx"
    (store / "a").mkdir()
    torch_file_reader(store / "a/reads-store.pt", store / "b/iris.onnx", shared=False)
    torch_file_reader(store / "a/reads-cache.pt", cached, shared=False)
    testing.torch_iris(store / "a/iris.pt")  # a program that reads its own folder only
    return store, cache


@pytest.fixture(scope="module")
def server(
    folders: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    store, cache = folders
    args = testing.serve_args(store, cache, workers=WORKERS, tenant_from="name:1")
    with testing.RunningServer([*args, "--refuse-pickle"], cache.parent) as running:
        for name in ("b/iris.onnx", "b/iris.tar.gz"):  # tenant b's models, loaded first
            assert invoke(running, name).status_code == 200
        yield running


def invoke(server: testing.RunningServer, name: str) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{name}/invoke", json=ROWS, timeout=120)


@pytest.mark.parametrize("name", ["a/reads-store.pt", "a/reads-cache.pt"])
def test_a_tenants_program_cannot_read_another_tenants_model(
    server: testing.RunningServer, folders: tuple[Path, Path], name: str
) -> None:
    """torch.from_file on tenant b's model, read in place from the store or unpacked into the
    cache, gets none of its bytes."""
    store, _ = folders
    response = invoke(server, name)
    stolen = [float(byte) for byte in (store / "b/iris.onnx").read_bytes()[:16]]
    assert response.status_code != 200, f"tenant a read tenant b's model: {response.text}"
    assert json.dumps(stolen, separators=(",", ":"))[1:-1] not in response.text
    assert "Permission denied" in response.text  # the sandbox refused, not something else


def test_a_tenants_program_loads_from_its_own_folder(server: testing.RunningServer) -> None:
    response = invoke(server, "a/iris.pt")
    assert response.status_code == 200, response.text


def test_two_tenants_never_share_a_worker(server: testing.RunningServer) -> None:
    for name in ("a/iris.pt", "b/iris.onnx"):
        assert invoke(server, name).status_code == 200
    workers: dict[str, set[int]] = {}
    for event in server.events("load"):
        workers.setdefault(event["model"].split("/")[0], set()).add(event["worker"])
    assert workers["a"] and workers["b"] and not workers["a"] & workers["b"], workers


def test_a_tenant_finding_every_worker_held_by_others_gets_one(
    server: testing.RunningServer,
) -> None:
    """Tenants a and b hold both sandboxed workers: tenant c's load makes one free for it."""
    for name in ("a/iris.pt", "b/iris.onnx"):
        assert invoke(server, name).status_code == 200
    response = invoke(server, "c/iris.onnx")
    assert response.status_code == 200, response.text
    emptied = [e for e in server.events("evict") if e["reason"] == "tenant_apart"]
    replaced = [e for e in server.events("worker_exit") if e["reason"] == "recycled"]
    assert emptied and replaced, "no sandboxed worker was emptied and replaced for tenant c"
