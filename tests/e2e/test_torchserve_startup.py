"""What a server started with TorchServe's config.properties holds before its first call: the
models `load_models` names, under the names and versions TorchServe registers them with, and the
timeouts describe shows for them, the ones in force."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers.serving import Servers
from helpers.ts_config import noop_versions, started_from_properties

from modelhost import testing

pytestmark = pytest.mark.e2e

ROW = {"instances": testing.iris_rows(1)}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """noop.mar, and noop_2.mar: a renamed archive of noop's version 2.0, as TorchServe's
    examples ship them; timed.mar, whose model-config.yaml sets its own timeouts."""
    root = tmp_path_factory.mktemp("ts-startup-store")
    source = noop_versions(tmp_path_factory, root)
    (source / "model-config.yaml").write_text("responseTimeout: 7\nstartupTimeout: 9\n")
    testing.mar_of(source, root / "timed.mar")
    return root


class Started:
    def __init__(self, serve: Servers, work: Path, store: Path) -> None:
        management = testing.free_port()
        properties = (
            f"management_address=http://127.0.0.1:{management}\n"
            f"model_store={store}\n"
            "load_models=noop.mar,noop_2.mar,renamed=noop_2.mar,timed.mar\n"
            "default_response_timeout=33\n"
            "default_startup_timeout=44\n"
            "disable_token_authorization=true\n"
            "enable_model_api=true\n"
        )
        server = started_from_properties(serve, work, properties, workers=1)
        self.inference = httpx.Client(base_url=server.url, timeout=60)
        self.management = httpx.Client(base_url=f"http://127.0.0.1:{management}", timeout=60)

    def described(self, path: str) -> list[dict[str, Any]]:
        answer = self.management.get(f"/models/{path}")
        assert answer.status_code == 200, answer.text
        descriptions: list[dict[str, Any]] = answer.json()
        return descriptions


@pytest.fixture(scope="module")
def ts(serve: Servers, store: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    started = Started(serve, tmp_path_factory.mktemp("ts-startup"), store)
    yield started
    started.inference.close()
    started.management.close()


def test_load_models_registers_an_archive_under_its_manifests_name_and_version(
    ts: Started,
) -> None:
    """`load_models=noop.mar,noop_2.mar`: TorchServe names each archive after its manifest's
    modelName, so noop_2.mar adds noop's version 2.0; the first stays the default."""
    described = ts.described("noop/all")
    assert sorted((d["modelVersion"], d["loadedAtStartup"]) for d in described) == [
        ("1.0", True),
        ("2.0", True),
    ], described
    assert ts.described("noop")[0]["modelVersion"] == "1.0"
    assert ts.management.get("/models/noop_2").status_code == 404
    assert ts.inference.post("/predictions/noop/2.0", json=ROW).status_code == 200


def test_load_models_with_a_name_registers_the_archive_under_it(ts: Started) -> None:
    """`renamed=noop_2.mar`: the name given, at the archive's version."""
    (described,) = ts.described("renamed")
    assert (described["modelName"], described["modelVersion"]) == ("renamed", "2.0")
    assert ts.inference.post("/predictions/renamed", json=ROW).status_code == 200


def test_describe_shows_the_servers_timeouts_from_config_properties(ts: Started) -> None:
    """default_response_timeout=33 and default_startup_timeout=44 are the deadlines in force
    for a model without its own, and describe shows them."""
    (described,) = ts.described("noop")
    assert (described["responseTimeout"], described["startupTimeout"]) == (33, 44), described


def test_describe_shows_the_timeouts_of_the_models_config(ts: Started) -> None:
    (described,) = ts.described("timed")
    assert (described["responseTimeout"], described["startupTimeout"]) == (7, 9), described


@pytest.mark.parametrize(
    ("url", "shown"), [("timed.mar", (7, 9)), ("noop.mar", (3, 4))], ids=["own", "none"]
)
def test_the_archives_timeouts_win_over_the_registrations(
    ts: Started, url: str, shown: tuple[int, int]
) -> None:
    """TorchServe takes an archive's responseTimeout and startupTimeout over a registration's
    response_timeout and startup_timeout, which count for an archive without its own."""
    name = f"given_{url.removesuffix('.mar')}"
    params = {"url": url, "model_name": name, "response_timeout": 3, "startup_timeout": 4}
    assert ts.management.post("/models", params=params).status_code == 200
    (described,) = ts.described(name)
    assert (described["responseTimeout"], described["startupTimeout"]) == shown, described
