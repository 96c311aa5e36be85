"""Three settings observed on a real server (the rows test_every_setting.py listed as not yet
observed): the eviction policy a server was given is the one that picks its victims; no more
downloads run at once than --max-concurrent-downloads; no more connections are served at once
than --max-connections (uvicorn counts a connection and its request's task)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from helpers.loopback import http_server

from modelhost import testing

pytestmark = pytest.mark.e2e

MiB = 2**20


def test_the_eviction_policy_given_picks_the_victims(
    tmp_path_factory: pytest.TempPathFactory, serve: object
) -> None:
    store = tmp_path_factory.mktemp("policy-store")
    forest = testing.random_forest(store / ".src/f.joblib", 2 * MiB)
    names = [f"f{i}.joblib" for i in range(12)]
    for name in names:
        testing.copy_artifact(forest, store / name)
    probe = serve(store, workers=1)  # type: ignore[operator]
    httpx.post(f"{probe.url}/models/f0.joblib/invoke", json=testing.digits_rows(1), timeout=60)
    footprint = httpx.get(f"{probe.url}/models/f0.joblib").json()["memoryBytes"]
    server = probe
    for _ in range(3):  # the idle PSS moves as servers beside it share library pages or stop
        baseline = httpx.get(f"{server.url}/stats").json()["memory"]["baselineBytes"]
        server.stop()
        budget = baseline + (4 + 2) * footprint  # four forests, and a load's peak: not twelve
        server = serve(  # type: ignore[operator]
            store, workers=1, memory_budget=budget, eviction_policy="cost-aware"
        )
        if httpx.get(f"{server.url}/stats").json()["memory"]["baselineBytes"] <= baseline:
            break
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for name in names * 2:
            response = client.post(f"/models/{name}/invoke", json=testing.digits_rows(1))
            assert response.status_code == 200, response.text
    evictions = [
        json.loads(line)
        for line in server.log_text().splitlines()
        if line.startswith("{") and '"kind":"evict"' in line
    ]
    assert evictions and {e["reason"] for e in evictions} == {"cost-aware"}


class SlowStore(http.server.BaseHTTPRequestHandler):
    """Serves files of `root`, each GET taking a second; counts GETs running at once."""

    root = Path()
    lock = threading.Lock()
    running = 0
    most = 0

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's naming
        self._reply(body=False)

    def do_GET(self) -> None:  # noqa: N802
        with self.lock:
            SlowStore.running += 1
            SlowStore.most = max(SlowStore.most, SlowStore.running)
        try:
            time.sleep(1.0)
        finally:
            # counted out before the bytes go: the server may start its next download as soon
            # as they arrive, before this thread runs again
            with self.lock:
                SlowStore.running -= 1
        self._reply(body=True)

    def _reply(self, body: bool) -> None:
        path = self.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        data = path.read_bytes()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if body:
            self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def slow_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("slow-store")
    trained = testing.iris_logreg(root / ".src/iris.joblib")
    for i in range(3):
        testing.copy_artifact(trained, root / f"m{i}.joblib")
    SlowStore.root = root
    with http_server(SlowStore) as url:
        yield url


def test_max_concurrent_downloads_is_a_cap(slow_store: str, serve: object) -> None:
    """No more downloads run at once than `--max-concurrent-downloads`."""
    server = serve(slow_store, workers=1, max_concurrent_downloads=2)  # type: ignore[operator]
    SlowStore.most = 0

    def invoke(name: str) -> int:
        url = f"{server.url}/models/{name}/invoke"
        return httpx.post(url, json=testing.iris_rows(1), timeout=60).status_code

    with ThreadPoolExecutor(3) as pool:
        statuses = list(pool.map(invoke, [f"m{i}.joblib" for i in range(3)]))
    assert statuses == [200, 200, 200]
    assert SlowStore.most == 2  # three misses at once: two downloads, then the third


def test_max_connections_is_a_cap(tmp_path_factory: pytest.TempPathFactory, serve: object) -> None:
    """No more connections are served at once than `--max-connections`."""
    store = tmp_path_factory.mktemp("slow-model")
    testing.slow_handler_folder(store / "slow")
    server = serve(store, workers=1, max_connections=2)  # type: ignore[operator]
    with ThreadPoolExecutor(1) as pool:
        held = pool.submit(
            httpx.post, f"{server.url}/models/slow/invoke", json={"sleep": 3.0}, timeout=60
        )
        time.sleep(1.0)  # the slow request: a connection and its task, the two allowed
        refused = httpx.get(f"{server.url}/ping", timeout=10)
        assert held.result().status_code == 200
    assert refused.status_code == 503
    assert httpx.get(f"{server.url}/ping", timeout=10).status_code == 200  # free again
