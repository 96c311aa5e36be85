"""A worker's door for the fronts: the gate refuses closed models, and a close waits for the
direct requests still running on the model."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

from modelhost.workers.direct import Door, Gate
from modelhost.workers.gather import Gathering
from modelhost.workers.messages import (
    Answer,
    Answered,
    Failed,
    Infer,
    Item,
    Reply,
    Unload,
    decode_reply,
    encode,
)
from modelhost.workers.wire import Frame, FrameReader
from modelhost.workers.wire import encode as encode_frame

WAIT_S = 10.0


def infer_frame(model: str, request_id: int = 7, tenant: str = "") -> bytes:
    infer = Infer(model, (Item("application/json", "application/json", {}, 2),), tenant=tenant)
    return encode_frame(Frame(request_id, encode(infer), b"[]"))


def test_a_closed_model_is_refused_and_an_open_one_entered() -> None:
    gate = Gate()
    assert not gate.enter("m")
    gate.open("m")
    assert gate.enter("m")
    gate.leave("m")
    gate.close("m")
    assert not gate.enter("m")


def test_a_close_waits_for_the_direct_requests_running() -> None:
    gate = Gate()
    gate.open("m")
    assert gate.enter("m")
    closed = threading.Event()
    closing = threading.Thread(target=lambda: (gate.close("m"), closed.set()))
    closing.start()
    assert not closed.wait(0.2)  # the request still runs
    assert not gate.enter("m")  # closed to new ones meanwhile
    gate.leave("m")
    assert closed.wait(WAIT_S)
    closing.join(WAIT_S)


class Served:
    """A worker's infer that holds each request until let go; `send` runs it in a slot."""

    def __init__(self, slots: int = 1) -> None:
        self.running, self.go = threading.Event(), threading.Event()
        self.order: list[str] = []  # the models run, in turn
        self.now = self.most = 0  # batches running at once
        self.lock = threading.Lock()
        self.gathering = Gathering(slots, lambda model: 1, self)
        self.send = self.gathering.send

    def __call__(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        with self.lock:
            self.order.append(request.model)
            self.now += 1
            self.most = max(self.most, self.now)
        self.running.set()
        self.go.wait(WAIT_S)
        with self.lock:
            self.now -= 1
        return Answered((Answer("application/json", 4),), 1.0), b"[42]"


def ask(path: str, frame: bytes) -> tuple[int, Reply, bytes]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(path)
        sock.sendall(frame)
        reply = FrameReader(sock).read()
    return reply.request_id, decode_reply(reply.header), reply.payload


def test_the_door_answers_open_models_and_refuses_the_rest(tmp_path: Path) -> None:
    gate, served = Gate(), Served()
    served.go.set()
    path = str(tmp_path / "d.sock")
    Door(path, gate, served.send).start()
    request_id, reply, _ = ask(path, infer_frame("m"))
    assert request_id == 7 and isinstance(reply, Failed)
    assert reply.failure.type.endswith("ModelNotLoaded")
    gate.open("m")
    request_id, reply, payload = ask(path, infer_frame("m", 9))
    assert request_id == 9 and isinstance(reply, Answered) and payload == b"[42]"
    _, reply, _ = ask(path, encode_frame(Frame(3, encode(Unload("m")))))
    assert isinstance(reply, Failed)  # a front may send Infer only


def test_an_unload_waits_for_a_direct_request_on_its_model(tmp_path: Path) -> None:
    """The model's close (an unload's first step) returns only after the answer went out."""
    gate, served = Gate(), Served()
    gate.open("m")
    path = str(tmp_path / "d.sock")
    Door(path, gate, served.send).start()
    answers: list[Reply] = []
    asking = threading.Thread(target=lambda: answers.append(ask(path, infer_frame("m"))[1]))
    asking.start()
    assert served.running.wait(WAIT_S)
    closed = threading.Event()
    threading.Thread(target=lambda: (gate.close("m"), closed.set()), daemon=True).start()
    assert not closed.wait(0.2)
    served.go.set()
    assert closed.wait(WAIT_S)
    asking.join(WAIT_S)
    assert isinstance(answers[0], Answered)


def test_the_fronts_and_the_frontend_share_the_inference_threads() -> None:
    """A worker given one inference thread runs one batch at a time, whoever sent each."""
    from modelhost.workers.worker import Worker

    ours, theirs = socket.socketpair()
    worker = Worker(ours, 1, threads=1)
    running, most = [0], [0]
    lock = threading.Lock()

    def infer(request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.05)
        with lock:
            running[0] -= 1
        return Answered((), 0.0), b""

    worker.gathering.run = infer
    request = Infer("m", ())
    callers = [threading.Thread(target=worker.infer_in_slot, args=(request, b"")) for _ in range(4)]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join(WAIT_S)
    ours.close()
    theirs.close()
    assert most == [1]  # four callers, one at a time


def until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not done() and time.monotonic() < deadline:
        time.sleep(0.005)


def replies(sock: socket.socket, count: int) -> list[int]:
    reader = FrameReader(sock)
    return [reader.read().request_id for _ in range(count)]


def test_a_fronts_batches_wait_in_fair_order_not_in_its_socket(tmp_path: Path) -> None:
    """One front's connection: while tenant a's batch holds the one slot, a's next three and
    then b's one arrive; b's runs next, as it would from four senders."""
    served, gate, path = Served(), Gate(), str(tmp_path / "d.sock")
    for model in ("a0", "a1", "a2", "a3", "b0"):
        gate.open(model)
    Door(path, gate, served.send).start()
    models = [("a0", "a"), ("a1", "a"), ("a2", "a"), ("a3", "a"), ("b0", "b")]
    frames = [infer_frame(model, index, tenant) for index, (model, tenant) in enumerate(models)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(path)
        sock.sendall(b"".join(frames))
        until(lambda: served.gathering.waiting == 4)
        served.go.set()
        assert sorted(replies(sock, 5)) == [0, 1, 2, 3, 4]
    assert served.order == ["a0", "b0", "a1", "a2", "a3"]


def test_a_fronts_batches_use_every_inference_thread(tmp_path: Path) -> None:
    """Two batches on one front's connection, two threads: both run at once."""
    served, gate, path = Served(slots=2), Gate(), str(tmp_path / "d.sock")
    gate.open("m")
    Door(path, gate, served.send).start()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(WAIT_S)
        sock.connect(path)
        sock.sendall(infer_frame("m", 1) + infer_frame("m", 2))
        until(lambda: served.most == 2)
        served.go.set()
        assert sorted(replies(sock, 2)) == [1, 2]
    assert served.most == 2
