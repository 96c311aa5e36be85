"""Idle unload per model (Ollama's keep_alive, a model at a time): a model's own idle_unload_s,
from its modelhost.toml, its archive's model-config.yaml or its registration, over the server's
`--idle-unload-s`; 0 keeps it loaded however long it goes unused."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(1)


def mar_folder(folder: Path, model_config: str) -> Path:
    """An MMS handler folder laid out as an unpacked `.mar` with this model-config.yaml."""
    testing.mms_handler_folder(folder)
    (folder / "model-config.yaml").write_text(model_config)
    manifest = {"model": {"handler": "handler.py", "configFile": "model-config.yaml"}}
    (folder / "MAR-INF").mkdir()
    (folder / "MAR-INF" / "MANIFEST.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("idle-store")
    testing.iris_logreg(root / "plain.joblib")
    testing.iris_logreg(root / "registered.joblib")
    (testing.mms_handler_folder(root / "brief") / "modelhost.toml").write_text(
        "idle_unload_s = 1\n"
    )
    (testing.mms_handler_folder(root / "kept") / "modelhost.toml").write_text("idle_unload_s = 0\n")
    mar_folder(root / "yaml-brief", "idle_unload_s: 1\n")
    return root


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def never_idle(store: Path, management_port: int, serve: Servers) -> testing.RunningServer:
    """A server that never unloads idle models of its own accord."""
    return serve(store, workers=1, memory_budget="2GiB", management_port=management_port)


@pytest.fixture(scope="module")
def quickly_idle(store: Path, serve: Servers) -> testing.RunningServer:
    """A server that unloads a model a second after its last use."""
    return serve(store, workers=1, memory_budget="2GiB", idle_unload_s=1)


@pytest.fixture
def never(never_idle: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=never_idle.url, timeout=60) as http:
        yield http


@pytest.fixture
def quick(quickly_idle: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=quickly_idle.url, timeout=60) as http:
        yield http


def invoked(http: httpx.Client, name: str) -> None:
    response = http.post(f"/models/{name}/invoke", json=ROWS)
    assert response.status_code == 200, response.text


def loaded(http: httpx.Client, name: str) -> bool:
    described = http.get(f"/models/{name}")
    return described.status_code == 200 and described.json()["state"] == "loaded"


def wait_until(check: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the server never reached the state the test waits for"
        time.sleep(0.1)


def test_a_models_own_idle_unload_s_unloads_it(never: httpx.Client) -> None:
    """modelhost.toml's idle_unload_s unloads the model; the server's setting keeps the rest."""
    for name in ("plain.joblib", "brief"):
        invoked(never, name)
    wait_until(lambda: not loaded(never, "brief"))
    assert loaded(never, "plain.joblib")


def test_model_config_yaml_idle_unload_s(never: httpx.Client) -> None:
    invoked(never, "yaml-brief")
    wait_until(lambda: not loaded(never, "yaml-brief"))


def test_register_model_with_idle_unload_s(never: httpx.Client, management_port: int) -> None:
    """idle_unload_s at registration, in seconds, is the model's own."""
    params = {"url": "registered.joblib", "model_name": "keep-alive", "idle_unload_s": "1"}
    with httpx.Client(base_url=f"http://127.0.0.1:{management_port}", timeout=60) as management:
        assert management.post("/models", params=params).status_code == 200
    invoked(never, "keep-alive")
    wait_until(lambda: not loaded(never, "keep-alive"))


def test_idle_unload_s_of_zero_keeps_a_model_the_server_would_unload(quick: httpx.Client) -> None:
    for name in ("kept", "plain.joblib"):
        invoked(quick, name)
    wait_until(lambda: not loaded(quick, "plain.joblib"))
    assert loaded(quick, "kept")
