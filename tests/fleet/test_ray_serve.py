"""modelhost as a Ray Serve application on a local Ray instance, 2 replicas: each model stays on
one replica, each replica keeps its own budget, and SageMaker's header works through it."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator

import httpx
import pytest
from fleet_tools import INSTANCE, IRIS_ROW

from modelhost import testing

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")

pytestmark = pytest.mark.e2e
MODELS = [f"tenants/t{i:03d}.joblib" for i in range(8)]
BUDGET = "512MiB"


@pytest.fixture(scope="module")
def ray_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from modelhost.integrations.ray_serve import modelhost_app

    root = tmp_path_factory.mktemp("ray-store")
    trained = testing.iris_logreg(root / ".src/iris.joblib")
    for model in MODELS:
        testing.copy_artifact(trained, root / model)
    work = tmp_path_factory.mktemp("ray")
    port = testing.free_port()
    # Ray's socket paths must fit sun_path, which pytest's (and xdist's) folders may not
    ray_dir = tempfile.TemporaryDirectory(prefix="ray-")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=ray_dir.name)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        args = ["--model-store", str(root), "--workers", "1", "--memory-budget", BUDGET]
        # each replica's disk cache in a folder of its own
        serve.run(modelhost_app([*args, "--cache-dir", str(work / "cache-{replica}")], replicas=2))
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()
        ray_dir.cleanup()


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
