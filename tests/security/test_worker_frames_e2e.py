"""A sandboxed worker's code writing its own frames on its socket to the frontend: garbage, a
hang-up, a header that does not decode, answers to calls never made or of the wrong kind, a huge
length, a frame past its call's cap. The frontend answers the caller at once, kills the worker,
and other tenants carry on. A trusted model's code past its cap on a front's link: the front
drops the link and relays."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers.fronts import direct_on_front
from helpers.hostile import ROWS, hostile_store, invoke, two_tenants
from helpers.loopback import wait_for
from helpers.serving import Servers

from modelhost import testing

pytestmark = pytest.mark.e2e

# the worker's socket and the id of the call being answered, found from inside a handler
PRELUDE = """
import gc, socket, sys, time
from modelhost.workers.messages import Answered, Loaded, Unloaded, encode
from modelhost.workers.wire import PREFIX

def the_call():
    worker = next(o for o in gc.get_objects() if type(o).__name__ == "Worker")
    frame = sys._getframe()
    while type(frame.f_locals.get("frame")).__name__ != "Frame":
        frame = frame.f_back
    return worker.sock, frame.f_locals["frame"].request_id

def handle(data, context):
    if data is None:
        return None
    sock, request_id = the_call()
    attack(sock, request_id)
    return [{"survived": True} for _ in data]
"""

ATTACKS = {
    "garbage": (
        "def attack(sock, request_id):\n    sock.sendall(b'\\xff' * 64)\n    time.sleep(60)\n"
    ),
    "hangs-up": (
        "def attack(sock, request_id):\n    sock.shutdown(socket.SHUT_RDWR)\n    time.sleep(60)\n"
    ),
    "undecodable": (
        "def attack(sock, request_id):\n"
        "    sock.sendall(PREFIX.pack(request_id, 1, 0) + b'\\xc1')  # no MessagePack\n"
        "    time.sleep(60)\n"
    ),
    "huge": (
        "def attack(sock, request_id):\n"
        "    sock.sendall(PREFIX.pack(request_id, 0, 2**32 - 1))\n"
        "    for _ in range(16):\n"
        "        sock.sendall(bytes(1 << 20))\n"
        "    sock.shutdown(socket.SHUT_RDWR)\n"
        "    time.sleep(60)\n"
    ),
    "over-cap": (  # 1.5 GiB of a frame claiming 2 GiB, for a batch of one
        "def attack(sock, request_id):\n"
        "    sock.sendall(PREFIX.pack(request_id, 0, 2**31))\n"
        "    try:\n"
        "        for _ in range(1536):\n"
        "            sock.sendall(bytes(1 << 20))\n"
        "    except OSError:\n"
        "        pass  # dropped\n"
        "    time.sleep(60)\n"
    ),
    "strangers-id": (
        "def attack(sock, request_id):\n"
        "    header = encode(Answered((), 1.0))\n"
        "    for stranger in (request_id + 1000, 2**64 - 1):\n"
        "        sock.sendall(PREFIX.pack(stranger, len(header), 0) + header)\n"
    ),
    "claims-memory": (
        "def attack(sock, request_id):\n    pass\n\n"
        "sock, request_id = the_call()  # the load's, as the handler is imported\n"
        "header = encode(Loaded(footprint=2**62, load_ms=1.0, batches=False, peak=2**62))\n"
        "sock.sendall(PREFIX.pack(request_id, len(header), 0) + header)\n"
    ),
    "holds-gil": (
        "import re\n\n"
        "def attack(sock, request_id):  # backtracks in C, under the GIL, for ever\n"
        "    re.match(r'(a+)+$', 'a' * 64 + 'b')\n"
    ),
    "wrong-kind": (
        "def attack(sock, request_id):\n"
        "    header = encode(Unloaded(2**62))\n"
        "    sock.sendall(PREFIX.pack(request_id, len(header), 0) + header)\n"
    ),
    "unasked-answer": (  # id 0 is what no call asked for: output only
        "def attack(sock, request_id):\n"
        "    header = encode(Answered((), 1.0))\n"
        "    sock.sendall(PREFIX.pack(0, len(header), 0) + header)\n"
    ),
}


# a trusted model's code writing on its worker's direct socket to a front, not the main process's
DIRECT = """
import select, sys
from modelhost.workers.wire import PREFIX

attacks = 0  # of the fronts' batches, so far

def handle(data, context):
    global attacks
    if data is None:
        return None
    caller = sys._getframe()
    while caller is not None and "conn" not in caller.f_locals:
        caller = caller.f_back
    if caller is not None:  # a front's batch, read on the direct socket
        attacks += 1
        conn, request_id = caller.f_locals["conn"], caller.f_locals["frame"].request_id
        conn.sendall(PREFIX.pack(request_id, 0, 2**31))
        select.select([conn], [], [], 30)  # until the front hangs up
    return [{"attacks": attacks} for _ in data]
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("store")
    handlers = {f"{name}/model": PRELUDE + attack for name, attack in ATTACKS.items()}
    return hostile_store(root, handlers | {"direct-over-cap/model": DIRECT})


@pytest.fixture(scope="module")
def server(
    store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    scratch = tmp_path_factory.mktemp("server")
    # each attack a tenant: four deaths' worth hold one back (test_poison_tenants_e2e.py)
    with two_tenants(store, scratch, "name:2", default_response_timeout_s=8) as running:
        yield running


def evil(attack: str) -> str:
    """The model of `attack`, whose tenant under name:2 is its own."""
    return f"evil/{attack}/model"


def worker_pid(server: testing.RunningServer, model: str) -> int:
    """The process that loaded `model` last."""
    worker = [e["worker"] for e in server.events("load") if e["model"] == model][-1]
    return {e["worker"]: e["detail"]["pid"] for e in server.events("worker_start")}[worker]


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def assert_good_answers(server: testing.RunningServer) -> None:
    response = invoke(server, "good/iris.onnx")
    assert response.status_code == 200, response.text


KILLED = ["garbage", "hangs-up", "undecodable", "huge", "wrong-kind", "unasked-answer"]


@pytest.mark.parametrize("name", KILLED)
def test_a_worker_breaking_its_frames_is_killed(server: testing.RunningServer, name: str) -> None:
    """Its caller gets 503 WorkerDied at once, not a deadline's 504; the worker's process goes
    (left running, it would hold memory and CPU no one counts); the other tenant answers."""
    response = invoke(server, evil(name))
    assert response.status_code == 503, response.text
    assert response.json()["type"] == "WorkerDied", response.text
    pid = worker_pid(server, evil(name))
    wait_for(lambda: not running(pid), f"worker {pid}, which broke its frames, to be killed")
    assert_good_answers(server)


def test_a_huge_length_is_not_allocated(server: testing.RunningServer) -> None:
    """A frame that claims 4 GiB is read as its bytes come, not allocated for its claim."""
    assert invoke(server, evil("huge")).status_code == 503
    status = Path(f"/proc/{server.pid}/status").read_text()
    peak = next(line for line in status.splitlines() if line.startswith("VmHWM"))
    peak_kib = int(peak.split()[1])
    assert peak_kib < 2**20, f"the frontend's resident set peaked at {peak_kib} KiB"
    assert_good_answers(server)


def test_a_frame_past_its_calls_cap_is_cut_at_its_prefix(server: testing.RunningServer) -> None:
    """A frame claiming more than a batch of one may carry (max_response_size and a header)
    drops its worker as the prefix comes: 503 WorkerDied at once, not a deadline's 504, and the
    frontend holds none of the 1.5 GiB streamed after it."""
    response = invoke(server, evil("over-cap"))
    assert response.status_code == 503, response.text
    assert response.json()["type"] == "WorkerDied", response.text
    status = Path(f"/proc/{server.pid}/status").read_text()
    peak = next(line for line in status.splitlines() if line.startswith("VmHWM"))
    peak_kib = int(peak.split()[1])
    assert peak_kib < 2**20, f"the frontend's resident set peaked at {peak_kib} KiB"
    assert "its call allows (a header, and max_response_size an answer)" in server.log_text()
    pid = worker_pid(server, evil("over-cap"))
    wait_for(lambda: not running(pid), f"worker {pid}, past its frame's cap, to be killed")
    assert_good_answers(server)


def test_answers_to_calls_never_made_reach_no_call(server: testing.RunningServer) -> None:
    """Replies for ids the worker was never sent are dropped: its own call still gets its answer."""
    response = invoke(server, evil("strangers-id"))
    assert response.status_code == 200, response.text
    assert response.json() == {"survived": True}
    assert_good_answers(server)


def test_a_lie_about_memory_takes_no_room_from_others(server: testing.RunningServer) -> None:
    """A worker that answers its load with a 4 EiB footprint before the real answer: whatever
    its own model answers, the server neither crashes nor counts the lie against the budget."""
    invoke(server, evil("claims-memory"))
    assert_good_answers(server)
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text.splitlines()
    used = next(line for line in metrics if line.startswith("modelhost_memory_used_bytes "))
    assert float(used.split()[1]) < 2**40, used


def test_a_worker_holding_the_gil_is_cut_at_its_deadlines(server: testing.RunningServer) -> None:
    """Its caller gets 504 at the response deadline and the worker is killed at the stuck one;
    meanwhile the other tenant answers."""
    answers: list[httpx.Response] = []
    hog = threading.Thread(target=lambda: answers.append(invoke(server, evil("holds-gil"))))
    hog.start()
    wait_for(lambda: any(e["model"] == evil("holds-gil") for e in server.events("load")), "load")
    assert_good_answers(server)
    hog.join()
    assert answers[0].status_code == 504, answers[0].text
    pid = worker_pid(server, evil("holds-gil"))
    wait_for(lambda: not running(pid), f"worker {pid}, stuck under the GIL, to be killed")
    assert_good_answers(server)


def test_a_worker_holding_the_gil_is_killed_as_the_server_stops(
    store: Path, tmp_path: Path
) -> None:
    """A worker stuck under the GIL never reads the end of its socket: the stopping server
    kills it, so no process of a model's outlives the server."""
    args = testing.serve_args(
        store, tmp_path / "cache", workers=1, tenant_from="name:1", drain_timeout_s=1
    )
    with testing.RunningServer([*args, "--refuse-pickle"], tmp_path) as server:
        hog = threading.Thread(target=invoke, args=(server, evil("holds-gil")), daemon=True)
        hog.start()
        wait_for(
            lambda: any(e["model"] == evil("holds-gil") for e in server.events("load")), "load"
        )
        server.stop()
    assert server.leaked_pids == []


def test_a_frame_past_its_batchs_cap_drops_a_fronts_link(store: Path, serve: Servers) -> None:
    """A frame on a worker's direct socket claiming more than a batch of one may carry: the
    front drops the link as the prefix comes and relays the request, as on a dead worker's link,
    instead of holding the stream until its deadline's 504. The relayed answer counts the
    direct batch that came first."""
    server = serve(store, workers=1, fronts=2, default_response_timeout_s=8)
    assert invoke(server, evil("direct-over-cap")).json() == {"attacks": 0}
    answer: object = None
    for _ in range(20):  # until the front's table has the model, a hit goes direct
        connection = direct_on_front(server)
        try:
            status, body = connection.call(
                "POST", f"/models/{evil('direct-over-cap')}/invoke", ROWS
            )
        finally:
            connection.close()
        assert status == 200, body
        if (answer := json.loads(body)) != {"attacks": 0}:
            break
        time.sleep(0.1)
    assert answer == {"attacks": 1}
    assert "a front dropped its link to worker socket" in server.log_text()
    assert_good_answers(server)
