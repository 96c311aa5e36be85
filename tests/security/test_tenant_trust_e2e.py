"""Per-tenant trust: a tenant the tenants file gives trust = "untrusted" has its models loaded
only in the sandboxed workers of --untrusted-workers, its pickles refused, while trusted
tenants' models run unconfined in the others; the two never share a worker."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.loopback import wait_for
from test_sandbox_e2e import ROWS, outside, probe_handler
from test_sandbox_reach_e2e import FORKS, PRELUDE, succeeded

from modelhost import testing

pytestmark = pytest.mark.e2e

TENANTS = '[tenants."evil"]\ntrust = "untrusted"\n'
# handlers that, as they load, read a host file and unpickle a pickle not named as one
SNOOP = "open({secret!r}).read()\n\ndef handle(data, context):\n    return data\n"
UNPICKLES = (
    "import collections, pickle\n\npickle.loads(pickle.dumps(collections.OrderedDict()))\n\n"
    "def handle(data, context):\n    return data\n"
)
# the sandbox's later refusals: forks, modes, another process's limits, datagram sockets
REACH = """
import resource

def tries(p):
    return {
        "fork": fork_and_leave,
        "chmod": lambda: os.chmod(p["secret"], 0o777),
        "prlimit": lambda: resource.prlimit(p["frontend"], resource.RLIMIT_CORE, (0, 0)),
        "datagram": lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM),
    }
"""


__all__ = ["outside"]  # the host folder with a secret, a fixture of the sandbox's tests


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, outside: Path
) -> Iterator[testing.RunningServer]:
    store = tmp_path_factory.mktemp("store")
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    for tenant in ("good", "evil"):
        (store / tenant).mkdir()
        probe_handler(store / tenant / "probe", outside, port)
        testing.iris_logreg(store / tenant / "iris.joblib")
        testing.onnx_iris(store / tenant / "iris.onnx")
    (store / "evil" / "snoop").mkdir()
    (store / "evil" / "snoop" / "handler.py").write_text(
        SNOOP.format(secret=str(outside / "secret"))
    )
    (store / "evil" / "unpickles").mkdir()
    (store / "evil" / "unpickles" / "handler.py").write_text(UNPICKLES)
    (store / "evil" / "reach").mkdir()
    (store / "evil" / "reach" / "handler.py").write_text(PRELUDE + FORKS + REACH)
    scratch = tmp_path_factory.mktemp("server")
    (scratch / "tenants.toml").write_text(TENANTS)
    args = testing.serve_args(
        store,
        scratch / "cache",
        workers=2,
        untrusted_workers=1,
        tenant_from="name:1",
        tenants_file=scratch / "tenants.toml",
    )
    with testing.RunningServer(args, scratch) as running:
        yield running


def invoke(server: testing.RunningServer, name: str) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{name}/invoke", json=ROWS, timeout=120)


def test_the_start_line_says_which_workers_are_sandboxed(server: testing.RunningServer) -> None:
    assert "--untrusted-workers 1: untrusted models load in sandboxed workers" in server.log_text()


def test_an_untrusted_tenants_handler_cannot_read_the_host(server: testing.RunningServer) -> None:
    response = invoke(server, "evil/probe")
    assert response.status_code == 200, response.text
    assert "done" not in response.json().values(), response.json()


def test_an_untrusted_tenants_handler_meets_every_refusal(
    server: testing.RunningServer, outside: Path
) -> None:
    """The sandboxed workers of --untrusted-workers refuse what --refuse-pickle's do."""
    mode = (outside / "secret").stat().st_mode
    params = {"secret": str(outside / "secret"), "frontend": server.pid}
    response = httpx.post(f"{server.url}/models/evil/reach/invoke", json=params, timeout=120)
    assert response.status_code == 200, response.text
    assert not succeeded(response.json()), response.json()
    assert (outside / "secret").stat().st_mode == mode
    assert invoke(server, "good/iris.onnx").status_code == 200


def test_a_trusted_tenants_handler_is_not_confined(server: testing.RunningServer) -> None:
    response = invoke(server, "good/probe")
    assert response.status_code == 200, response.text
    assert response.json()["read"] == "done"


def test_an_untrusted_tenants_pickle_is_refused_and_its_data_answers(
    server: testing.RunningServer,
) -> None:
    refused = invoke(server, "evil/iris.joblib")
    assert refused.status_code == 500, refused.text  # a load that failed, as --refuse-pickle's
    assert refused.json()["type"] == "UnsafeArtifact"
    assert 'tenant evil has trust = "untrusted"' in refused.json()["message"]
    assert invoke(server, "evil/iris.onnx").status_code == 200
    assert invoke(server, "good/iris.joblib").status_code == 200


@pytest.mark.parametrize("name", ["evil/snoop", "evil/unpickles"])
def test_a_sandboxed_workers_refusal_names_the_tenants_trust(
    server: testing.RunningServer, name: str
) -> None:
    """The server runs without --refuse-pickle: the refusal must not send the operator to it."""
    refused = invoke(server, name)
    assert refused.status_code == 500, refused.text
    assert refused.json()["type"] == "UnsafeArtifact", refused.text
    assert "--refuse-pickle" not in refused.json()["message"]
    assert 'trust = "untrusted"' in refused.json()["message"]


def test_trusted_and_untrusted_models_never_share_a_worker(server: testing.RunningServer) -> None:
    for name in ("evil/iris.onnx", "evil/probe", "good/iris.onnx", "good/probe"):
        assert invoke(server, name).status_code == 200
    workers: dict[str, set[int]] = {"evil": set(), "good": set()}
    for event in server.events("load"):
        workers[event["model"].split("/")[0]].add(event["worker"])
    assert workers["evil"] and workers["good"] and not workers["evil"] & workers["good"]


def test_a_lost_sandboxed_worker_is_replaced_by_a_sandboxed_one(
    server: testing.RunningServer,
) -> None:
    assert invoke(server, "evil/probe").status_code == 200
    evil = {e["worker"] for e in server.events("load") if e["model"].startswith("evil/")}
    pids = {e["worker"]: e["detail"]["pid"] for e in server.events("worker_start")}
    started = len(server.events("worker_start"))
    for worker in evil:
        os.kill(pids[worker], signal.SIGKILL)
    wait_for(lambda: len(server.events("worker_start")) > started, "the replacement")
    response = invoke(server, "evil/probe")  # loaded again, on the replacement
    assert response.status_code == 200, response.text
    assert "done" not in response.json().values(), response.json()
