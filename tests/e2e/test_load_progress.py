"""A cold start you can watch: a load reports its phases (downloading, bytes of total,
unpacking, loading) as `progress` events, and `GET /models/{model}` shows the load under way."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.handlers import gated_handler_folder
from helpers.serving import Servers
from helpers.stores import StaticHttpServer

from modelhost import testing

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder served over HTTP: an MMS handler's archive."""
    root = tmp_path_factory.mktemp("progress-http")
    testing.tar_gz_of(testing.mms_handler_folder(root / ".src" / "m"), root / "m.tar.gz")
    yield root


@pytest.fixture(scope="module")
def http_store(served: Path) -> Iterator[StaticHttpServer]:
    with StaticHttpServer(served) as server:
        yield server


def test_a_cold_load_reports_each_phase(
    served: Path, http_store: StaticHttpServer, serve: Servers
) -> None:
    """Downloading with the archive's size as the total, then unpacking, then loading."""
    server = serve(http_store.url + "/", workers=1, memory_budget="2GiB")
    rows = testing.iris_rows(1)
    answered = httpx.post(f"{server.url}/predictions/m.tar.gz", json=rows, timeout=60)
    assert answered.status_code == 200, answered.text
    progress = [e for e in server.events("progress") if e["model"] == "m.tar.gz"]
    assert [e["reason"] for e in progress][:1] == ["downloading"], progress
    assert progress[0]["detail"]["total_bytes"] == (served / "m.tar.gz").stat().st_size
    phases = [e["reason"] for e in progress]
    assert phases.index("unpacking") < phases.index("loading"), phases


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("progress-gates") / "open"


@pytest.fixture(scope="module")
def gated_server(
    tmp_path_factory: pytest.TempPathFactory, gate: Path, serve: Servers
) -> testing.RunningServer:
    store = tmp_path_factory.mktemp("progress-store")
    gated_handler_folder(store / "slow-load", gate, gates_load=True)
    return serve(store, workers=1, memory_budget="2GiB")


def test_get_model_shows_the_load_under_way(
    gated_server: testing.RunningServer, gate: Path
) -> None:
    """While a load waits at its gate the model is `loading`, in the `loading` phase; then
    `loaded`, with no progress left."""
    with (
        httpx.Client(base_url=gated_server.url, timeout=60) as http,
        concurrent.futures.ThreadPoolExecutor(1) as pool,
    ):
        waiting = pool.submit(http.post, "/predictions/slow-load", content=b"x")
        described = until_loading(http, "slow-load")
        assert described["loadProgress"]["phase"] == "loading", described
        gate.touch()
        assert waiting.result().status_code == 200
        described = http.get("/models/slow-load").json()
        assert (described["state"], "loadProgress" in described) == ("loaded", False)


def until_loading(http: httpx.Client, name: str, timeout_s: float = 60.0) -> dict[str, object]:
    """`GET /models/{name}` once it describes a load under way."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        answer = http.get(f"/models/{name}")
        if answer.status_code == 200 and answer.json().get("loadProgress"):
            assert answer.json()["state"] == "loading"
            return dict(answer.json())
        time.sleep(0.05)
    raise AssertionError(f"{name} never showed a load under way: {answer.text}")
