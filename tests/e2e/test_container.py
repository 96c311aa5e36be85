"""The SageMaker container: its Dockerfile, and its entrypoint run directly in both modes
(no Docker engine runs here); `OPT_ML_DIR` stands in for /opt/ml."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import psutil
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
ENTRYPOINT = ROOT / "deploy" / "sagemaker-entrypoint.sh"
ROWS = testing.iris_rows(2)
JSON = {"content-type": "application/json"}


def test_the_dockerfile_is_what_sagemaker_runs() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert "LABEL com.amazonaws.sagemaker.capabilities.multi-models=true" in text
    assert "EXPOSE 8080" in text
    entrypoint = re.search(r"^ENTRYPOINT (.+)$", text, re.MULTILINE)
    assert entrypoint is not None
    # exec form, under tini (Debian's): PID 1 reaps orphans and passes SIGTERM to the server
    assert json.loads(entrypoint.group(1)) == [
        "/usr/bin/tini",
        "--",
        "/usr/local/bin/modelhost-entrypoint",
    ]
    assert re.search(r"apt-get install .*\btini\b", text)
    user = re.findall(r"^USER (\S+)$", text, re.MULTILINE)
    assert user and user[-1] not in ("root", "0", "0:0"), "the server must not run as root"
    assert re.search(r"^CMD \[\"serve\"\]$", text, re.MULTILINE)
    assert "COPY deploy/sagemaker-entrypoint.sh /usr/local/bin/modelhost-entrypoint" in text


def entrypoint_server(opt_ml: Path, **variables: str) -> testing.RunningServer:
    """`sagemaker-entrypoint.sh serve`, with the venv's `modelhost` on PATH as in the image."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {
        **os.environ,
        "PATH": path,
        "OPT_ML_DIR": str(opt_ml),
        "MODELHOST_CACHE_DIR": str(opt_ml.parent / "cache"),
        "MODELHOST_MEMORY_BUDGET": "4GiB",
        "SAGEMAKER_MODEL_SERVER_WORKERS": "1",
        **variables,
    }
    command = ["sh", str(ENTRYPOINT), "serve"]
    return testing.RunningServer([], opt_ml.parent, env=env, command=command)


def assert_the_server_is_the_process(server: testing.RunningServer) -> None:
    """The script exec'd the server: the process SIGTERM goes to is modelhost, not a shell."""
    assert "modelhost" in " ".join(psutil.Process(server.pid).cmdline())


def test_single_model_mode_serves_opt_ml_model(tmp_path: Path) -> None:
    testing.iris_logreg(tmp_path / "ml" / "model" / "model.joblib")
    server = entrypoint_server(tmp_path / "ml")
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert_the_server_is_the_process(server)
        response = http.post("/invocations", content=json.dumps(ROWS), headers=JSON)
        assert response.status_code == 200, response.text
        assert response.json() == {"predictions": [0, 0]}
        assert response.headers["x-modelhost-cache"] == "hit"  # loaded at start
        assert server.stop() == 0


def test_ping_is_healthy_only_once_the_single_model_loaded(tmp_path: Path) -> None:
    """SageMaker's single-model mode: a model that cannot load leaves /ping at 503, so the
    endpoint never takes traffic it cannot answer (sagemaker-inference-toolkit#138)."""
    testing.corrupt_artifact(tmp_path / "ml" / "model" / "model.joblib")
    server = entrypoint_server(tmp_path / "ml")
    server.until_healthy = False  # /ping answers, unhealthy
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        ping = http.get("/ping")
        assert ping.status_code == 503, ping.text
        message = ping.json()["message"]  # says why, as migrating-sagemaker.md says it does
        assert "model model failed to load" in message and "could not load" in message
        assert server.stop() == 0


def test_ping_waits_for_the_model_of_a_single_model_server(tmp_path: Path) -> None:
    """SAGEMAKER_MULTI_MODEL=false loads the one model at start, before /ping says healthy."""
    testing.iris_logreg(tmp_path / "store" / "iris.joblib")
    args = testing.serve_args(tmp_path / "store", tmp_path / "cache", single_model="iris.joblib")
    env = {**os.environ, "SAGEMAKER_MULTI_MODEL": "false", "MODELHOST_WORKERS": "1"}
    server = testing.RunningServer(args, tmp_path, env=env)
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        response = http.post("/invocations", content=json.dumps(ROWS), headers=JSON)
        assert response.status_code == 200, response.text
        assert response.headers["x-modelhost-cache"] == "hit"  # loaded before /ping said so


def test_multi_model_mode_loads_from_opt_ml_models(tmp_path: Path) -> None:
    model_dir = tmp_path / "ml" / "models" / "3f2a" / "model"
    testing.iris_logreg(model_dir / "model.joblib")
    server = entrypoint_server(tmp_path / "ml", SAGEMAKER_MULTI_MODEL="true")
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        assert_the_server_is_the_process(server)
        spec = {"model_name": "churn", "url": str(model_dir)}
        assert http.post("/models", json=spec).status_code == 200
        headers = {**JSON, "X-Amzn-SageMaker-Target-Model": "churn"}
        response = http.post("/invocations", content=json.dumps(ROWS), headers=headers)
        assert response.status_code == 200, response.text
        assert response.json() == {"predictions": [0, 0]}
        unnamed = http.post("/invocations", content=json.dumps(ROWS), headers=JSON)
        assert unnamed.status_code == 400 and "X-Amzn-SageMaker-Target-Model" in unnamed.text
        assert server.stop() == 0


@pytest.mark.parametrize("contract", ["", "false"])
def test_multi_model_mode_keeps_the_contract(tmp_path: Path, contract: str) -> None:
    """Multi-model mode keeps the SageMaker contract unless turned off.

    Multi-model mode loads only through LoadModel (a model in the store but not loaded is
    404, SageMaker's cue to load it); MODELHOST_SAGEMAKER_CONTRACT=false on the container
    brings back loading on the first request."""
    testing.iris_logreg(tmp_path / "ml" / "models" / "3f2a" / "model" / "model.joblib")
    variables = {"MODELHOST_SAGEMAKER_CONTRACT": contract} if contract else {}
    server = entrypoint_server(tmp_path / "ml", SAGEMAKER_MULTI_MODEL="true", **variables)
    with server, httpx.Client(base_url=server.url, timeout=60) as http:
        invoked = http.post("/models/3f2a/model/invoke", content=json.dumps(ROWS), headers=JSON)
        assert invoked.status_code == (200 if contract == "false" else 404), invoked.text
        assert server.stop() == 0


def test_other_commands_run_as_given() -> None:
    result = subprocess.run(
        ["sh", str(ENTRYPOINT), "echo", "hello"], capture_output=True, text=True, check=True
    )
    assert result.stdout == "hello\n"
