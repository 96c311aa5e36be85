"""TorchServe's per-model timeouts, end to end: `startup_timeout` and `response_timeout` at
registration (seconds) and `startupTimeout` and `responseTimeout` in an archive's
model-config.yaml, on a server whose own timeouts are one second.

Each model waits at a gate (a file the test creates), so a load or a request outlives the
server's timeouts for as long as the test holds it, then the model's own timeout must keep it.
"""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from helpers.handlers import gated_handler_folder
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

SERVER_TIMEOUT_S = 1.0  # the server's response and load timeouts
PAST_SERVER_TIMEOUTS_S = 2.5  # past both, and past a stuck batch's kill at twice the first


def gated_mar(folder: Path, gate: Path, gates_load: bool, model_config: str) -> Path:
    """A `.mar` of a gated handler whose model-config.yaml says `model_config`."""
    gated_handler_folder(folder, gate, gates_load)
    (folder / "model-config.yaml").write_text(model_config)
    manifest = {"model": {"handler": "handler.py", "configFile": "model-config.yaml"}}
    (folder / "MAR-INF").mkdir()
    (folder / "MAR-INF" / "MANIFEST.json").write_text(json.dumps(manifest))
    return testing.zip_of(folder, folder.parent / f"{folder.name}.mar")


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gates")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, gates: Path) -> Path:
    root = tmp_path_factory.mktemp("ts-timeouts-store")
    gated_handler_folder(root / "slow-answer", gates / "slow-answer")
    gated_handler_folder(root / "slow-load", gates / "slow-load", gates_load=True)
    yaml_answer = root / ".src/yaml-answer"
    gated_mar(yaml_answer, gates / "yaml-answer", False, "responseTimeout: 60\n")
    gated_mar(root / ".src/yaml-load", gates / "yaml-load", True, "startupTimeout: 60\n")
    return root


@pytest.fixture(scope="module")
def management_port() -> int:
    return testing.free_port()


@pytest.fixture(scope="module")
def server(store: Path, management_port: int, serve: Servers) -> testing.RunningServer:
    return serve(
        store,
        workers=1,
        threads_per_worker=1,
        memory_budget="2GiB",
        default_response_timeout_s=SERVER_TIMEOUT_S,
        worker_load_timeout_s=SERVER_TIMEOUT_S,
        management_port=management_port,
    )


@pytest.fixture
def inference(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


@pytest.fixture
def management(server: testing.RunningServer, management_port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{management_port}", timeout=60) as http:
        yield http


def wait_until(check: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "the server never reached the state the test waits for"
        time.sleep(0.05)


def answered_past_server_timeouts(
    inference: httpx.Client, model: str, gate: Path
) -> httpx.Response:
    """A request held at the model's gate past the server's timeouts, then let through."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        held = pool.submit(inference.post, f"/predictions/{model}", content=b"held")
        time.sleep(PAST_SERVER_TIMEOUTS_S)
        gate.touch()
        return held.result()


def loaded_past_server_timeouts(
    management: httpx.Client, inference: httpx.Client, params: dict[str, str], gate: Path
) -> None:
    """Register a model whose load waits at its gate past the server's timeouts; it loads."""
    name = params["model_name"]
    accepted = management.post("/models", params={**params, "synchronous": "false"})
    assert accepted.status_code == 202, accepted.text
    time.sleep(PAST_SERVER_TIMEOUTS_S)
    gate.touch()
    wait_until(lambda: state(inference, name) != "loading")
    assert state(inference, name) == "loaded", "the load was cut short"


def state(inference: httpx.Client, name: str) -> str:
    described = inference.get(f"/models/{name}")
    return str(described.json()["state"]) if described.status_code == 200 else "absent"


def test_register_model_with_response_timeout(
    management: httpx.Client, inference: httpx.Client, gates: Path
) -> None:
    """A request may run for the model's response_timeout, past the server's default."""
    params = {"url": "slow-answer", "model_name": "patient", "response_timeout": "60"}
    registered = management.post("/models", params={**params, "initial_workers": "1"})
    assert registered.status_code == 200, registered.text
    answered = answered_past_server_timeouts(inference, "patient", gates / "slow-answer")
    assert answered.status_code == 200, answered.text
    assert answered.json() == {"batch": 1, "body": "held"}


def test_register_model_with_startup_timeout(
    management: httpx.Client, inference: httpx.Client, gates: Path
) -> None:
    """A load may take the model's startup_timeout, past the server's worker_load_timeout."""
    params = {"url": "slow-load", "model_name": "slow-start", "startup_timeout": "60"}
    params["initial_workers"] = "1"
    loaded_past_server_timeouts(management, inference, params, gates / "slow-load")
    answered = inference.post("/predictions/slow-start", content=b"now")
    assert answered.json() == {"batch": 1, "body": "now"}


def test_model_config_yaml_response_timeout(
    management: httpx.Client, inference: httpx.Client, gates: Path
) -> None:
    """responseTimeout in the archive's model-config.yaml is the model's response deadline."""
    params = {"url": ".src/yaml-answer.mar", "model_name": "yaml-answer", "initial_workers": "1"}
    assert management.post("/models", params=params).status_code == 200
    answered = answered_past_server_timeouts(inference, "yaml-answer", gates / "yaml-answer")
    assert answered.status_code == 200, answered.text


def test_model_config_yaml_startup_timeout(
    management: httpx.Client, inference: httpx.Client, gates: Path
) -> None:
    """startupTimeout in the archive's model-config.yaml is the model's load deadline."""
    params = {"url": ".src/yaml-load.mar", "model_name": "yaml-load", "initial_workers": "1"}
    loaded_past_server_timeouts(management, inference, params, gates / "yaml-load")


def test_a_model_without_its_own_timeouts_keeps_the_servers(
    inference: httpx.Client, gates: Path
) -> None:
    """The server's response timeout still bounds a model that sets none."""
    (gates / "slow-answer").unlink(missing_ok=True)
    late = inference.post("/models/slow-answer/invoke", content=b"late")
    (gates / "slow-answer").touch()
    assert late.status_code == 504, late.text
    assert "default_response_timeout" in late.json()["message"]
