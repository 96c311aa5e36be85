"""`--restore-registered`: models registered through TorchServe's management API are registered
again when the server restarts on the same cache folder, as TorchServe's snapshots restore them;
an unregistered one stays gone."""

from __future__ import annotations

import functools
import http.server
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.loopback import http_server

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = testing.iris_rows(1)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    testing.iris_logreg(tmp_path / "store" / "iris.pkl")
    return tmp_path / "store"


def restartable(store: Path, work: Path, port: int, *flags: str) -> testing.RunningServer:
    """A server on `work`'s cache folder with TorchServe's management API on `port`, allowed to
    register from loopback HTTP too."""
    allowed = f"{store.resolve().as_uri()}/*,http://127.0.0.1:*"
    args = testing.serve_args(
        store,
        work / "cache",
        workers=1,
        memory_budget="2GiB",
        management_port=port,
        allowed_urls=allowed,
    )
    return testing.RunningServer([*args, *flags], work)


@pytest.fixture
def management_port() -> int:
    return testing.free_port()


@pytest.fixture
def management(management_port: int) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=f"http://127.0.0.1:{management_port}", timeout=60) as http:
        yield http


def register_two_keep_one(management: httpx.Client) -> None:
    """`kept` with its own batch size on one worker, and `dropped`, unregistered again."""
    params = {"url": "iris.pkl", "model_name": "kept", "initial_workers": "1", "batch_size": "3"}
    assert management.post("/models", params=params).status_code == 200
    params = {"url": "iris.pkl", "model_name": "dropped"}
    assert management.post("/models", params=params).status_code == 200
    assert management.delete("/models/dropped").status_code == 200


def test_a_restart_keeps_the_registered_models(
    store: Path, tmp_path: Path, management_port: int, management: httpx.Client
) -> None:
    """`kept` comes back with its batch size and loaded; `dropped` does not."""
    server = restartable(store, tmp_path, management_port, "--restore-registered")
    with server:
        register_two_keep_one(management)
    with server:
        (described,) = management.get("/models/kept").json()
        assert (described["batchSize"], described["modelVersion"]) == (3, "1.0")
        assert len(described["workers"]) == 1, described
        assert management.get("/models/dropped").status_code == 404
        answered = httpx.post(f"{server.url}/predictions/kept", json=ROWS, timeout=60)
        assert answered.status_code == 200, answered.text


def test_without_the_flag_a_restart_forgets(
    store: Path, tmp_path: Path, management_port: int, management: httpx.Client
) -> None:
    """The default is unchanged: registrations live as long as the server."""
    server = restartable(store, tmp_path, management_port)
    with server:
        register_two_keep_one(management)
    with server:
        assert management.get("/models/kept").status_code == 404


def test_torchserves_snapshot_registers_its_models(
    store: Path, tmp_path: Path, management_port: int, management: httpx.Client
) -> None:
    """A snapshot .cfg given as the config: its models register at start, and once."""
    snapshot = (
        '{\\n  "name"\\: "20241001120000000-snapshot.cfg",\\n  "modelCount"\\: 1,\\n  "models"\\: '
        '{\\n    "snap"\\: {\\n      "1.0"\\: {\\n        "defaultVersion"\\: true,\\n'
        '        "marName"\\: "iris.pkl",\\n        "minWorkers"\\: 1,\\n        "maxWorkers"\\: 1,'
        '\\n        "batchSize"\\: 2,\\n        "maxBatchDelay"\\: 100\\n      }\\n    }\\n  }\\n}'
    )
    properties = tmp_path / "snapshot.cfg"
    properties.write_text(f"disable_token_authorization=true\nmodel_snapshot={snapshot}\n")
    args = testing.serve_args(
        store, tmp_path / "cache", workers=1, memory_budget="2GiB", management_port=management_port
    )
    server = testing.RunningServer([*args, "--mms-config", str(properties)], tmp_path)
    for _ in range(2):  # the second start finds it in the journal too
        with server:
            (described,) = management.get("/models/snap").json()
            assert (described["batchSize"], len(described["workers"])) == (2, 1), described
            assert "could not restore" not in server.log_text()


def test_without_the_flag_a_url_registration_is_not_listed_after_a_restart(
    store: Path, tmp_path: Path, management_port: int, management: httpx.Client
) -> None:
    """Its download stays in the cache, but the restarted server loads `remote` from the store,
    which lacks it: listing it on disk would offer a model whose every invocation is a 404."""
    files = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(store))
    server = restartable(store, tmp_path, management_port)
    with http_server(files) as base, server:
        params = {"url": f"{base}/iris.pkl", "model_name": "remote", "initial_workers": "1"}
        assert management.post("/models", params=params).status_code == 200
    with server:
        assert httpx.get(f"{server.url}/models", timeout=60).json() == {"models": []}
        answered = httpx.post(f"{server.url}/models/remote/invoke", json=ROWS, timeout=60)
        assert answered.status_code == 404
