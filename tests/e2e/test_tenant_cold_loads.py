"""Loads, downloads and unpacks in fair order across tenants: one tenant's burst of cold models
does not queue another tenant's cold model behind all of it."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from helpers.serving import invoke as invoke_json
from helpers.stores import StaticHttpServer

from modelhost import testing

pytestmark = pytest.mark.e2e

MiB = 2**20
BURST = [f"tenants/t1/m{i}.joblib" for i in range(16)]
QUIET = "tenants/t2/own.joblib"
ARCHIVES = [f"tenants/t1/a{i}.tar.gz" for i in range(16)]
QUIET_ARCHIVE = "tenants/t2/own.tar.gz"
HEAVY_ARCHIVES = [f"tenants/t2/a{i}.tar.gz" for i in range(8)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every model a copy of one forest, each its own model."""
    root = tmp_path_factory.mktemp("cold-store")
    forest = testing.random_forest(root / ".src/forest.joblib", 8 * MiB, seed=0)
    for name in (*BURST, QUIET):
        testing.copy_artifact(forest, root / name)
    folder = testing.copy_artifact(forest, root / ".src/folder/model.joblib").parent
    archive = testing.tar_gz_of(folder, root / ".src/forest.tar.gz")
    for name in (*ARCHIVES, QUIET_ARCHIVE, *HEAVY_ARCHIVES):
        testing.copy_artifact(archive, root / name)
    return root


def serving(store: str | Path, work: Path, **settings: object) -> testing.RunningServer:
    """One worker, tenants by the names' first two segments."""
    args = testing.serve_args(
        store, work / "cache", workers=1, memory_budget="4GiB", tenant_from="name:2", **settings
    )
    return testing.RunningServer(args, work)


@pytest.fixture(scope="module")
def cold_server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    with serving(store, tmp_path_factory.mktemp("cold-server")) as server:
        yield server


@pytest.fixture(scope="module")
def weighted_server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    """t2 weighs four times t1."""
    work = tmp_path_factory.mktemp("weighted-server")
    tenants_file = work / "tenants.toml"
    tenants_file.write_text('[tenants."tenants/t2"]\nweight = 4\n')
    with serving(store, work, tenants_file=tenants_file) as server:
        yield server


@pytest.fixture(scope="module")
def remote_server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    """The same models from an HTTP store, one download at a time."""
    work = tmp_path_factory.mktemp("remote-server")
    with (
        StaticHttpServer(store) as http_store,
        serving(http_store.url + "/", work, max_concurrent_downloads=1) as server,
    ):
        yield server


def invoke(url: str, name: str) -> int:
    with httpx.Client(base_url=url, timeout=120) as http:
        return invoke_json(http, name, testing.digits_rows(1)).status_code


def burst_then_quiet(
    server: testing.RunningServer, first: str, burst: list[str] = BURST, quiet: str = QUIET
) -> list[tuple[str, str]]:
    """t1's burst, then, once its first `first` event is seen, t2's one cold model; each
    event's (model, phase: a progress's, else its kind), in order, with ("sent", "") where t2's
    request went."""
    with ThreadPoolExecutor(len(burst)) as clients:
        answered = [clients.submit(invoke, server.url, name) for name in burst]
        deadline = time.monotonic() + 60
        while not server.events(first) and time.monotonic() < deadline:
            time.sleep(0.01)
        sent = len(server.events())
        assert invoke(server.url, quiet) == 200
        assert [status.result() for status in answered] == [200] * len(burst)
    happened = [
        (event.get("model", ""), event["reason"] if event["kind"] == "progress" else event["kind"])
        for event in server.events()
    ]
    happened.insert(sent, ("sent", ""))
    return happened


def between(
    happened: list[tuple[str, str]], start: tuple[str, str], end: tuple[str, str], what: str
) -> list[str]:
    """The models whose `what` came after `start` and before `end`."""
    ahead = happened[happened.index(start) : happened.index(end)]
    return [model for model, phase in ahead if phase == what]


def test_a_cold_model_loads_next_after_another_tenant_s_burst(
    cold_server: testing.RunningServer,
) -> None:
    happened = burst_then_quiet(cold_server, "load")
    started = between(happened, (QUIET, "queued"), (QUIET, "loading"), "loading")
    assert not started, f"tenant t1's loads went before t2's, queued behind them: {started}"
    listed = httpx.get(f"{cold_server.url}/tenants").json()["tenants"]
    loads = {tenant["tenant"]: tenant["loads"] for tenant in listed}
    assert loads == {"tenants/t1": len(BURST), "tenants/t2": 1}
    assert all(tenant["loadSeconds"] > 0 for tenant in listed), listed


def test_a_cold_model_downloads_next_after_another_tenant_s_burst(
    remote_server: testing.RunningServer,
) -> None:
    happened = burst_then_quiet(remote_server, "download")
    # one download at a time: the one under way as t2's waits ends first, and those that had
    # left the slot may still be checking what they received (one, or two on a busy machine);
    # in arrival order t2's would wait for the burst's dozen left
    done = between(happened, (QUIET, "downloading"), (QUIET, "download"), "download")
    assert len(done) <= 3, f"tenant t1's downloads went before t2's, queued behind them: {done}"


def test_a_cold_archive_unpacks_next_after_another_tenant_s_burst(
    cold_server: testing.RunningServer,
) -> None:
    happened = burst_then_quiet(cold_server, "unpack", ARCHIVES, QUIET_ARCHIVE)
    waited = (QUIET_ARCHIVE, "queued"), (QUIET_ARCHIVE, "unpacking")
    started = between(happened, *waited, "unpacking")
    assert not started, f"tenant t1's unpacks went before t2's, queued behind them: {started}"


def test_archives_unpack_by_their_tenants_weights(
    weighted_server: testing.RunningServer,
) -> None:
    both = (*ARCHIVES, *HEAVY_ARCHIVES)
    with ThreadPoolExecutor(len(both)) as clients:
        statuses = list(clients.map(functools.partial(invoke, weighted_server.url), both))
    assert statuses == [200] * len(both)
    progress = weighted_server.events("progress")
    unpacks = [event["model"] for event in progress if event["reason"] == "unpacking"]
    first, last = (f(unpacks.index(name) for name in HEAVY_ARCHIVES) for f in (min, max))
    beside = [model for model in unpacks[first:last] if model in ARCHIVES]
    # weight 4 against 1: one of t1's for about four of t2's, where equal weights alternate
    assert len(beside) <= 4, f"t1 (weight 1) unpacked {len(beside)} beside t2's 8 (weight 4)"
