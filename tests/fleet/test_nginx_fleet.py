"""Three real instances behind the shipped nginx config (Debian's nginx), on loopback: each model
is served by one instance, the one `simulate --instances` computes; losing or restarting an
instance under load fails no request and moves only that instance's models."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fleet_tools import (
    INSTANCE,
    Answer,
    Load,
    RunningNginx,
    instance,
    invoke,
    iris_store,
    require_nginx,
    running,
)

from modelhost import testing
from modelhost.toolkit.simulate.ring import Ring

pytestmark = pytest.mark.e2e

MODELS = [f"tenants/t{i:03d}.joblib" for i in range(60)]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return iris_store(tmp_path_factory.mktemp("fleet-store"), MODELS)


@pytest.fixture(scope="module")
def fleet(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[list[testing.RunningServer], RunningNginx]]:
    """Three instances behind nginx, for every test: where nginx sends a model is the ring's
    choice, whatever the instances have loaded, and a test that kills or restarts an instance
    leaves it back on its port, with its id, answering. An instance is out for 2 s after a
    failure rather than the shipped 10 s: a test bringing one back waits that out, and nginx
    tries one that is down or coming back more often, which exercises no less."""
    require_nginx()
    work = tmp_path_factory.mktemp("fleet")
    servers = [instance(store, work, i, drain_timeout_s=10) for i in range(3)]
    router = RunningNginx(work / "nginx", [name(s) for s in servers], fail_timeout_s=2)
    with running(servers), router:
        yield servers, router


def name(server: testing.RunningServer) -> str:
    """Its line in nginx's server list, which is what the ring hashes."""
    return f"127.0.0.1:{server.port}"


def owners(answers: list[Answer], servers: list[testing.RunningServer]) -> dict[str, set[str]]:
    """The instances (by server line) that answered each model."""
    line_of = {f"fleet-{i}": name(s) for i, s in enumerate(servers)}
    found: dict[str, set[str]] = {}
    for answer in answers:
        found.setdefault(answer.model, set()).add(line_of.get(answer.instance, answer.instance))
    return found


def test_each_model_goes_to_its_ring_instance(fleet: tuple) -> None:
    """Each model is served by the instance the ring names."""
    servers, router = fleet
    ring = Ring([name(s) for s in servers])
    with httpx.Client(base_url=router.url, timeout=30) as client:
        answers = []
        for model in MODELS:
            for route in range(3):  # the path's model and the SageMaker header hash alike
                response = invoke(client, model, route)
                assert response.status_code == 200, response.text
                answers.append(Answer(model, 200, response.headers[INSTANCE], 0.0))
    served = owners(answers, servers)
    assert all(len(by) == 1 for by in served.values()), served
    assert {m: by.pop() for m, by in served.items()} == {m: ring.server_for(m) for m in MODELS}
    assert len({ring.server_for(m) for m in MODELS}) >= 2  # the models are spread out


def test_killing_an_instance_fails_nothing(fleet: tuple) -> None:
    """Killing an instance under load fails nothing and moves only its models."""
    servers, router = fleet
    ring = Ring([name(s) for s in servers])
    before = {m: ring.server_for(m) for m in MODELS}
    counts = sorted(servers, key=lambda s: sum(v == name(s) for v in before.values()))
    victim = counts[1]  # the instance with the median number of models: a typical loss
    load = Load(router.url, MODELS, users=4, max_requests=4000).start()
    try:
        load.wait_for(len(MODELS) * 4)
        killed_at = _kill(victim)
        load.wait_for(len(load.answers) + len(MODELS) * 8)
    finally:
        answers = load.stop()
        victim_id = f"fleet-{servers.index(victim)}"
        back_in(victim, victim_id, router, next(m for m in MODELS if before[m] == name(victim)))
    failed = [a for a in answers if a.status != 200]
    assert not failed, f"{len(failed)} of {len(answers)} failed, e.g. {failed[:3]}"
    after = owners([a for a in answers if a.sent_at > killed_at + 0.5], servers)
    assert set(after) == set(MODELS)
    assert all(len(by) == 1 for by in after.values()), after
    moved = {m for m, by in after.items() if by != {before[m]}}
    print(f"\nkill: {len(answers)} requests, {len(failed)} failed, {len(moved)} models moved")
    # only its models move, so the share that moves is its share of the ring: 1/3 on average,
    # within 1/3 + 5% for most fleets (tests/fleet/test_ring.py measures it over many)
    assert moved == {m for m in MODELS if before[m] == name(victim)}
    assert all(after[m] == {ring.server_for(m, down={name(victim)})} for m in MODELS)


def _kill(server: testing.RunningServer) -> float:
    os.killpg(server.pid, signal.SIGKILL)  # the frontend and its workers: a machine lost
    killed_at = time.monotonic()
    server.stop()
    return killed_at


def back_in(
    server: testing.RunningServer, instance_id: str, router: RunningNginx, model: str
) -> None:
    """`server` started again on its port, once nginx sends it `model` again: the shared fleet
    whole for the tests after."""
    server.start()
    deadline = time.monotonic() + 60
    with httpx.Client(base_url=router.url, timeout=30) as client:
        while invoke(client, model).headers.get(INSTANCE) != instance_id:
            assert time.monotonic() < deadline, f"nginx never sent {model} to {instance_id} again"
            time.sleep(0.1)


@pytest.mark.timeout(300)
def test_a_rolling_restart_under_load_fails_nothing(fleet: tuple) -> None:
    servers, router = fleet
    load = Load(router.url, MODELS, users=4, max_requests=40000).start()
    try:
        load.wait_for(len(MODELS) * 2)
        for index, server in enumerate(servers):
            assert server.stop() == 0  # SIGTERM: it drains what it holds, then exits
            restarted_at = len(load.answers)
            server.start()  # same port, same id
            # the next one only once nginx sends it requests again (its fail_timeout has passed):
            # with two instances out at once, nginx has none for some models and answers 502
            assert load.wait_for_instance(f"fleet-{index}", restarted_at)
    finally:
        answers = load.stop()
    failed = [a for a in answers if a.status != 200]
    print(f"\nrolling restart: {len(answers)} requests, {len(failed)} failed")
    assert not failed, f"{len(failed)} of {len(answers)} failed, e.g. {failed[:3]}"


def test_hot_model_spreads_over_ring_instances(fleet: tuple, tmp_path: Path) -> None:
    """A hot model in the map is spread over the instances the ring names."""
    servers, _ = fleet
    ring = Ring([name(s) for s in servers])
    hot = MODELS[0]
    lines = f'"{hot}" $modelhost_one_of_3;\n'
    router = RunningNginx(tmp_path / "hot-nginx", [name(s) for s in servers], lines)
    with router, httpx.Client(base_url=router.url, timeout=30) as client:
        answers = [
            Answer(m, 200, invoke(client, m, r).headers[INSTANCE], 0.0)
            for m in MODELS[:10]
            for r in range(30 if m == hot else 1)
        ]
    served = owners(answers, servers)
    assert served[hot] == {ring.server_for(f"{hot}#{i}") for i in range(3)}
    assert all(served[m] == {ring.server_for(m)} for m in MODELS[1:10])


def test_bench_through_the_router_shows_the_spread_over_instances(
    fleet: tuple, tmp_path: Path
) -> None:
    """`modelhost bench` works unchanged through nginx, and its summary counts the answers of
    each instance (X-Modelhost-Instance) exactly as the ring spreads the models."""
    from click.testing import CliRunner

    from modelhost.cli.main import main

    servers, router = fleet
    models = tmp_path / "models.txt"
    models.write_text("\n".join(MODELS) + "\n")
    result = CliRunner().invoke(
        main,
        ["bench", router.url, "--models", f"@{models}", "--concurrency", "4",
         "--requests", "600", "--warmup", "0", "--processes", "1", "--quiet",
         "--out", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out/summary.json").read_text())
    assert summary["requests"]["by_status"] == {"200": 600}
    assert set(summary["instances"]) == {f"fleet-{i}" for i in range(3)}
    assert sum(summary["instances"].values()) == 600
    assert all(f"fleet-{i}" in result.output for i in range(3))  # the terminal's table
