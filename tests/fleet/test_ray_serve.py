"""modelhost as a Ray Serve application on a local Ray instance, 2 replicas: each model stays on
one replica, each replica keeps its own budget, and SageMaker's header works through it."""

from __future__ import annotations

import gc
import os
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
from fleet_tools import INSTANCE, IRIS_ROW

from modelhost import testing

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

# the first test's setup starts Ray, which may wait up to WAIT's 120 s for its control store
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]
MODELS = [f"tenants/t{i:03d}.joblib" for i in range(8)]
BUDGET = "512MiB"
WAIT = "RAY_gcs_server_port_wait_time_s"


@pytest.fixture(scope="module")
def ray_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from modelhost.integrations.ray_serve import modelhost_app

    root = tmp_path_factory.mktemp("ray-store")
    trained = testing.iris_logreg(root / ".src/iris.joblib")
    for model in MODELS:
        testing.copy_artifact(trained, root / model)
    work = tmp_path_factory.mktemp("ray")
    port = testing.free_port()
    args = ["--model-store", str(root), "--workers", "1", "--memory-budget", BUDGET]
    # each replica's disk cache in a folder of its own
    app = modelhost_app([*args, "--cache-dir", str(work / "cache-{replica}")], replicas=2)
    with local_ray():
        try:
            serve.start(http_options={"host": "127.0.0.1", "port": port})
            serve.run(app)
            yield f"http://127.0.0.1:{port}"
        finally:
            serve.shutdown()


@contextmanager
def local_ray() -> Iterator[None]:
    """A local Ray, stopped however it ends."""
    # Ray's socket paths must fit sun_path, which pytest's (and xdist's) folders may not
    with tempfile.TemporaryDirectory(prefix="ray-") as ray_dir, pytest.MonkeyPatch.context() as env:
        if WAIT not in os.environ:  # Ray's 30 s for its control store; busy CI has taken longer
            env.setenv(WAIT, "120")
        try:
            start_ray(ray_dir)
            yield
        finally:
            ray.shutdown()


def start_ray(ray_dir: str) -> None:
    """Start Ray, or stop what it started and fail here rather than in a later test."""
    try:
        ray.init(num_cpus=2, include_dashboard=False, _temp_dir=ray_dir)
    except RuntimeError as error:
        # a traceback may hold the half-started node; collected running, its handles would
        # warn inside whichever test ran then
        for handle in gc.get_objects():
            if isinstance(handle, subprocess.Popen) and ray_dir in str(handle.args):
                handle.kill()
                handle.wait()
        pytest.fail(f"Ray did not start: {error}")


def test_each_model_stays_on_its_replica(ray_app: str) -> None:
    """Each model stays on the replica that first served it."""
    with httpx.Client(base_url=ray_app, timeout=60) as client:
        first = {m: call(client, m, 0).headers[INSTANCE] for m in MODELS}
        # a replica reports the models it serves every 0.1 s (Ray's push interval), through the
        # controller to the router; until then a model's next request may go to any replica
        time.sleep(3)
        served: dict[str, set[str]] = {}
        for route in range(6):
            for model in MODELS:
                served.setdefault(model, set()).add(call(client, model, route).headers[INSTANCE])
    assert served == {m: {first[m]} for m in MODELS}


def call(client: httpx.Client, model: str, route: int) -> httpx.Response:
    """Through SageMaker's header or the path, by turns."""
    if route % 2:
        response = client.post(f"/models/{model}/invoke", json=IRIS_ROW)
    else:
        headers = {"X-Amzn-SageMaker-Target-Model": model}
        response = client.post("/invocations", json=IRIS_ROW, headers=headers)
    assert response.status_code == 200, response.text
    return response


def test_each_replica_keeps_its_own_budget(ray_app: str) -> None:
    with httpx.Client(base_url=ray_app, timeout=60) as client:
        instances = {
            client.post(f"/models/{m}/invoke", json=IRIS_ROW).headers[INSTANCE] for m in MODELS
        }
    for instance in instances:
        url = "http://" + instance.split("@", 1)[1]  # the replica's own server, on loopback
        stats = httpx.get(f"{url}/metrics", timeout=10).text
        budget = _sample(stats, "modelhost_memory_budget_bytes")
        assert budget == 512 * 2**20
        assert _sample(stats, "modelhost_memory_committed_bytes") <= budget


def _sample(text: str, name: str) -> float:
    (line,) = [row for row in text.splitlines() if row.startswith(name + " ")]
    return float(line.split()[1])
