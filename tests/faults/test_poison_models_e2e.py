"""A model whose requests kill its worker is held back, so that it cannot take the models it
shares workers with down with it, nor keep the pool replacing workers."""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import (
    direct_on_front,
    hit_with_the_main_process_stopped,
    raw_invoke,
    raw_request,
)
from helpers.loopback import wait_for
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

ROWS = json.dumps(testing.iris_rows(1))
JSON = {"content-type": "application/json"}
POISON = b"boom"
PATIENCE_S = 60.0

# exits its process on a body holding POISON, as a handler crashing in native code would
POISONED_HANDLER = '''"""Answers, unless the body says boom."""

import os


def handle(data, context):
    if data is None:
        return None
    for request in data:
        body = request.get("body") or b""
        if b"boom" in (body.encode() if isinstance(body, str) else bytes(body)):
            os._exit(1)
    return [{"answered": True} for _ in data]
'''


# crashes in native code on a body holding POISON
SEGFAULTING_HANDLER = POISONED_HANDLER.replace("os._exit(1)", "ctypes.string_at(0)").replace(
    "import os", "import ctypes"
)
# killed by a signal nothing can catch, as by the kernel's OOM killer: a death naming no thread
SIGKILLED_HANDLER = POISONED_HANDLER.replace(
    "os._exit(1)", "os.kill(os.getpid(), signal.SIGKILL)"
).replace("import os", "import os, signal")
# answers at once, or after touching the file a body names, and a while
BUSY_HANDLER = '''"""Answers; a body of a path is touched, then answered after a while."""

import pathlib
import time


def handle(data, context):
    if data is None:
        return None
    for request in data:
        body = bytes(request.get("body") or b"")
        if body.startswith(b"/"):
            pathlib.Path(body.decode()).touch()
            time.sleep(5)
    return [{"answered": True} for _ in data]
'''
# hangs with the GIL free, as on a lock or a socket, on a body of a path, once it is touched
HANGING_HANDLER = BUSY_HANDLER.replace("time.sleep(5)", "time.sleep(600)")
SLOW_HANDLER = '''"""Answers after a while."""

import time


def handle(data, context):
    if data is None:
        return None
    time.sleep(1.5)
    return [{"answered": True} for _ in data]
'''


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    testing.iris_logreg(root / "good.joblib")
    for name, manifest in (("poisoned", ""), ("poisoned-pure", "idempotent = true\n")):
        (root / name).mkdir()
        (root / name / "handler.py").write_text(POISONED_HANDLER)
        if manifest:
            (root / name / "modelhost.toml").write_text(manifest)
    handlers = {
        "segfaults": SEGFAULTING_HANDLER,
        "slow": SLOW_HANDLER,
        "sigkilled": SIGKILLED_HANDLER,
        "busy": BUSY_HANDLER,
        "hangs": HANGING_HANDLER,
    }
    for name, source in handlers.items():
        (root / name).mkdir()
        (root / name / "handler.py").write_text(source)
    (root / "hangs" / "modelhost.toml").write_text("response_timeout_s = 2\n")
    return root


@pytest.fixture(scope="module")
def server(store: Path, serve: Servers) -> testing.RunningServer:
    return serve(store, workers=1)


@pytest.fixture
def client(server: testing.RunningServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=60) as http:
        yield http


def loads(server: testing.RunningServer, model: str) -> int:
    return sum(event["model"] == model for event in server.events("load"))


def deaths(server: testing.RunningServer) -> int:
    return sum(e["reason"] == "died" for e in server.events("worker_exit"))


def poison(client: httpx.Client, model: str) -> httpx.Response:
    headers = {"content-type": "application/octet-stream"}
    return client.post(f"/models/{model}/invoke", content=POISON, headers=headers)


def answers(client: httpx.Client) -> bool:
    return client.post("/models/good.joblib/invoke", content=ROWS, headers=JSON).status_code == 200


def test_a_model_that_killed_its_worker_twice_is_held_back(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """Two requests that each kill the worker, then the model is refused without a worker:
    its benign requests too, while the model beside it answers throughout."""
    assert answers(client)
    before = deaths(server)
    for _ in range(2):
        assert poison(client, "poisoned").status_code == 503  # may have run: not retried
        wait_for(lambda: answers(client), "the other model to answer again", PATIENCE_S)
    assert deaths(server) == before + 2
    for body in (POISON, b"fine"):
        refused = client.post("/models/poisoned/invoke", content=body)
        assert refused.status_code == 500, refused.text
        assert "held back" in refused.json()["message"], refused.text
    assert deaths(server) == before + 2
    assert answers(client)
    held = [e for e in server.events("failure") if e.get("reason") == "held_back"]
    assert [e["model"] for e in held] == ["poisoned"]


def test_a_retried_request_that_killed_two_workers_holds_its_model_back(
    client: httpx.Client, server: testing.RunningServer
) -> None:
    """An idempotent handler's request is tried again alone: the second death is the model's
    second, so one such request is enough."""
    wait_for(lambda: answers(client), "the model beside it to answer", PATIENCE_S)
    before = deaths(server)
    first = poison(client, "poisoned-pure")
    assert first.status_code == 500 and first.json()["type"] == "PoisonRequest", first.text
    again = poison(client, "poisoned-pure")
    assert again.status_code == 500 and "held back" in again.json()["message"], again.text
    assert deaths(server) == before + 2
    wait_for(lambda: answers(client), "the model beside it to answer", PATIENCE_S)


def test_a_model_poisoning_workers_through_fronts_is_held_back(store: Path, serve: Servers) -> None:
    """With fronts, a loaded model's requests go from a front straight to its worker, past the
    main process (a death with no call of its there); a front relays such a request, which may
    kill again. Sent only on fronts' connections, the booms get the model held back."""
    server = serve(store, workers=1, fronts=2)
    fine, boom = (
        raw_request("/models/poisoned/invoke", body, "content-type: application/octet-stream")
        for body in (b"fine", POISON)
    )
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for _ in range(4):  # two deaths' blame: at most two booms of two deaths each
            if client.post("/models/poisoned/invoke", content=b"fine").status_code != 200:
                break
            # the front answers it alone: the model is in its table
            assert hit_with_the_main_process_stopped(server, fine).startswith(b"HTTP/1.1 200")
            connection = direct_on_front(server)
            try:
                raw_invoke(connection, boom)
            finally:
                connection.close()
        refused = client.post("/models/poisoned/invoke", content=b"fine")
        assert refused.status_code == 500 and "held back" in refused.json()["message"]
    exits = [(e["reason"], e["detail"]["lost_requests"]) for e in server.events("worker_exit")]
    # one boom's: its front's batch's death and its relay's (unblamed, the front's, two booms)
    assert len(exits) == 2, exits


@pytest.mark.parametrize("killer", ["segfaults", "poisoned"])
def test_a_crash_or_an_exit_blames_its_own_thread_s_model_alone(
    store: Path, serve: Servers, killer: str
) -> None:
    """Two threads: a slow model's batch runs beside each batch that segfaults, or exits. The
    dump of the signal, or os._exit's, names the thread, so the killer has each death's whole
    blame and is held back at its second (shared, it would take four); the slow model is never
    blamed."""
    server = serve(store, workers=1, threads_per_worker=2)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for death in range(2):
            assert client.post(f"/models/{killer}/invoke", content=b"fine").status_code == 200
            with concurrent.futures.ThreadPoolExecutor(1) as beside:
                slow = beside.submit(client.post, "/models/slow/invoke", content=b"x")
                wait_for(lambda n=death: loads(server, "slow") > n, "the slow batch to run", 30)
                assert poison(client, killer).status_code == 503
                assert slow.result().status_code == 503  # its worker died under it
        refused = client.post(f"/models/{killer}/invoke", content=b"fine")
        assert refused.status_code == 500 and "held back" in refused.json()["message"]
        assert client.post("/models/slow/invoke", content=b"x").status_code == 200
    assert deaths(server) == 2
    held = [e["model"] for e in server.events("failure") if e.get("reason") == "held_back"]
    assert held == [killer]


def test_a_busy_model_beside_an_unnamed_killer_is_not_held_back(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    """A SIGKILL names no thread: each death's blame is shared among the batches it ran, the
    more on the one that served fewer requests since its load. A busy model whose batch ran at
    each of the killer's deaths, having served twenty since its load, is not held back with it
    (shared evenly, both would be at the fourth)."""
    server = serve(store, workers=1, threads_per_worker=2)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for death in range(4):
            for _ in range(20):
                assert client.post("/models/busy/invoke", content=b"fine").status_code == 200
            touched = tmp_path / f"running-{death}"
            with concurrent.futures.ThreadPoolExecutor(1) as beside:
                busy = beside.submit(client.post, "/models/busy/invoke", content=str(touched))
                wait_for(touched.exists, "the busy model's batch to run", 30)
                killed = poison(client, "sigkilled")
                if killed.status_code != 503:
                    break
                assert busy.result().status_code == 503  # its worker died under it
        assert killed.status_code == 500 and "held back" in killed.json()["message"]
        assert client.post("/models/busy/invoke", content=b"fine").status_code == 200
    held = [e["model"] for e in server.events("failure") if e.get("reason") == "held_back"]
    assert held == ["sigkilled"] and deaths(server) == 3


def test_a_hang_beside_another_batch_blames_the_stuck_call_s_model(
    store: Path, serve: Servers, tmp_path: Path
) -> None:
    """A batch stuck past its deadlines gets its worker killed, which names no thread. The
    worker answered a later call while it hung, so the GIL was free and the stuck call's model
    alone is to blame: held at its second death, though it served twenty requests since its
    load and the batch running beside it, of a model that served one, would take most of a
    share by requests served."""
    server = serve(store, workers=1, threads_per_worker=2)
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for death in range(3):
            if client.post("/models/hangs/invoke", content=b"fine").status_code != 200:
                break  # held back
            for _ in range(19):
                assert client.post("/models/hangs/invoke", content=b"fine").status_code == 200
            hung, beside = tmp_path / f"hung-{death}", tmp_path / f"beside-{death}"
            with concurrent.futures.ThreadPoolExecutor(2) as calls:
                stuck = calls.submit(client.post, "/models/hangs/invoke", content=str(hung))
                wait_for(hung.exists, "the stuck batch to run", 30)
                assert client.post("/models/busy/invoke", content=b"fine").status_code == 200
                busy = calls.submit(client.post, "/models/busy/invoke", content=str(beside))
                wait_for(beside.exists, "the busy model's batch to run", 30)
                assert stuck.result().status_code == 504, stuck.result().text
                assert busy.result().status_code == 503  # its worker was killed under it
        refused = client.post("/models/hangs/invoke", content=b"fine")
        assert refused.status_code == 500 and "held back" in refused.json()["message"]
        assert client.post("/models/busy/invoke", content=b"fine").status_code == 200
    held = [e["model"] for e in server.events("failure") if e.get("reason") == "held_back"]
    assert held == ["hangs"] and deaths(server) == 2
