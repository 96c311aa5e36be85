"""Batching across senders: batches of one model that wait for a slot run as one, each sender
getting its own answers, within the model's batch size, the time counted once."""

from __future__ import annotations

import functools
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from modelhost import testing
from modelhost.cache.entries import Artifact
from modelhost.host.manifests import Manifests
from modelhost.records.events import EventLog
from modelhost.scheduler import SchedulerSettings
from modelhost.workers.gather import Gathering, shared
from modelhost.workers.handlers.base import BatchHandler, InferReply, InferRequest
from modelhost.workers.messages import Answer, Answered, Failure, Infer, Item, Unload
from modelhost.workers.worker import Worker

WAIT_S = 10.0
MODEL = "m"


def batch(*bodies: bytes) -> tuple[Infer, bytes]:
    items = tuple(Item("text/plain", "text/plain", {}, len(body)) for body in bodies)
    return Infer(MODEL, items), b"".join(bodies)


class Caller(threading.Thread):
    """Sends one batch and keeps its outcome: the reply, or the error raised."""

    def __init__(self, infer: Gathering | Worker, request: tuple[Infer, bytes]) -> None:
        super().__init__(daemon=True)
        self.send, self.request = infer, request
        self.outcome: tuple[Answered, bytes] | BaseException | None = None

    def run(self) -> None:
        try:
            if isinstance(self.send, Worker):
                self.outcome = self.send.infer_in_slot(*self.request)
            else:
                self.outcome = self.send.infer(*self.request)
        except BaseException as error:  # noqa: BLE001 - the test reads it
            self.outcome = error


class Echo:
    """A worker's `infer` as a fake: each body answered as `<body>`; remembers its batches."""

    def __init__(self, infer_ms: float = 9.0, error: Exception | None = None) -> None:
        self.batches: list[list[bytes]] = []
        self.infer_ms, self.error = infer_ms, error

    def __call__(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        bodies, offset = [], 0
        for item in request.items:
            bodies.append(payload[offset : offset + item.size])
            offset += item.size
        self.batches.append(bodies)
        if self.error is not None:
            raise self.error
        answers = tuple(Answer("text/plain", len(body) + 2) for body in bodies)
        return Answered(answers, self.infer_ms), b"".join(b"<" + body + b">" for body in bodies)


def waiting_in_turn(
    gathering: Gathering, *requests: tuple[Infer, bytes], infer: Gathering | Worker | None = None
) -> Iterator[Caller]:
    """Callers started one after another while a batch of another model holds the one slot,
    each once it waits; then that batch ends."""
    run, running, held = gathering.run, threading.Event(), threading.Event()

    def holding(request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        if request.model != "busy":
            return run(request, payload)
        running.set()
        held.wait(WAIT_S)
        return Answered((), 0.0), b""

    gathering.run = holding
    busy = Caller(infer or gathering, (Infer("busy", ()), b""))
    busy.start()
    running.wait(WAIT_S)
    callers = []
    for request in requests:
        callers.append(Caller(infer or gathering, request))
        callers[-1].start()
        deadline = time.monotonic() + WAIT_S
        while gathering.waiting < len(callers) and time.monotonic() < deadline:
            time.sleep(0.001)
    held.set()
    busy.join(WAIT_S)
    for caller in callers:
        caller.join(WAIT_S)
        yield caller


def test_two_waiting_batches_run_as_one_and_each_gets_its_answers() -> None:
    echo = Echo()
    gathering = Gathering(1, lambda model: 8, echo)
    first, second = waiting_in_turn(gathering, batch(b"a", b"bb"), batch(b"c"))
    assert echo.batches == [[b"a", b"bb", b"c"]]
    assert isinstance(first.outcome, tuple) and isinstance(second.outcome, tuple)
    assert [list(a.bodies(p)) for a, p in (first.outcome, second.outcome)] == [
        [(Answer("text/plain", 3), b"<a>"), (Answer("text/plain", 4), b"<bb>")],
        [(Answer("text/plain", 3), b"<c>")],
    ]


def test_the_batch_time_is_shared_by_items_and_sums_to_it() -> None:
    gathering = Gathering(1, lambda model: 8, Echo(infer_ms=9.0))
    callers = list(waiting_in_turn(gathering, batch(b"a", b"b"), batch(b"c")))
    shares = [c.outcome[0].infer_ms for c in callers if isinstance(c.outcome, tuple)]
    assert shares == pytest.approx([6.0, 3.0]) and sum(shares) == pytest.approx(9.0)


def test_a_group_never_passes_the_batch_size() -> None:
    """Batches of 2, 2 and 1 under a batch size of 3: the second starts a group of its own,
    which the third joins."""
    echo = Echo()
    gathering = Gathering(1, lambda model: 3, echo)
    requests = batch(b"a", b"b"), batch(b"c", b"d"), batch(b"e")
    callers = list(waiting_in_turn(gathering, *requests))
    assert sorted(echo.batches) == [[b"a", b"b"], [b"c", b"d", b"e"]]
    payloads = [c.outcome[1] for c in callers if isinstance(c.outcome, tuple)]
    assert payloads == [b"<a><b>", b"<c><d>", b"<e>"]


def test_a_batch_at_its_size_runs_alone() -> None:
    echo = Echo()
    gathering = Gathering(1, lambda model: 1, echo)
    callers = list(waiting_in_turn(gathering, batch(b"a"), batch(b"b")))
    assert sorted(echo.batches) == [[b"a"], [b"b"]]
    assert [c.outcome[1] for c in callers if isinstance(c.outcome, tuple)] == [b"<a>", b"<b>"]


def test_a_failed_group_fails_every_batch_in_it() -> None:
    gathering = Gathering(1, lambda model: 8, Echo(error=RuntimeError("the runtime broke")))
    callers = list(waiting_in_turn(gathering, batch(b"a"), batch(b"b")))
    assert [type(c.outcome) for c in callers] == [RuntimeError, RuntimeError]


def test_failures_samples_and_device_growth_go_to_their_own_batch() -> None:
    """A request's failure stays its own; the handler's samples and a device's growth and the
    driver's count come back once, with the first batch."""
    broken = Answer(failure=Failure("BadRequestBody", "not a row"))
    counts = {"device_grown": 64, "device_process": 900, "device_models": 200}
    whole = Answered((Answer("a", 2), broken, Answer("a", 1)), 3.0, (), **counts)
    parts = shared(whole, b"xxy", [2, 1])
    assert parts == [
        (Answered((Answer("a", 2), broken), 2.0, (), **counts), b"xx"),
        (Answered((Answer("a", 1),), 1.0, ()), b"y"),
    ]


class Batching(BatchHandler):
    """A handler whose runtime takes a batch: it remembers each batch it was given."""

    batches = True

    def __init__(self) -> None:
        self.calls: list[list[bytes]] = []

    def infer_batch(self, requests: Sequence[InferRequest]) -> list[InferReply | Exception]:
        self.calls.append([request.body for request in requests])
        return [InferReply(request.body.upper(), "text/plain") for request in requests]


def test_a_worker_gives_its_handler_the_waiting_batches_as_one() -> None:
    """Two batches of one model sent to a worker while its one inference slot is held: one
    `infer_batch` call, each sender answered its own bodies."""
    ours, theirs = socket.socketpair()
    worker, handler = Worker(ours, 1, threads=1), Batching()
    worker.models[MODEL], worker.batch_sizes[MODEL] = handler, 8
    gathering = worker.gathering
    first, second = waiting_in_turn(gathering, batch(b"a"), batch(b"b", b"c"), infer=worker)
    ours.close()
    theirs.close()
    assert handler.calls == [[b"a", b"b", b"c"]]
    assert isinstance(first.outcome, tuple) and isinstance(second.outcome, tuple)
    assert (first.outcome[1], second.outcome[1]) == (b"A", b"BC")


def test_a_load_carries_the_batch_size_the_worker_gathers_to(tmp_path: Path) -> None:
    """The manifest's batch size, else the server's, travels with the load; the worker keeps it
    for a handler that batches."""
    folder = tmp_path / "model"
    testing.iris_logreg(folder / "model.joblib")
    (folder / "modelhost.toml").write_text("batch_size = 5\n")
    sizes = functools.partial(SchedulerSettings(max_batch_size=7).batch_size, handler_batches=True)
    manifests, artifact = (
        Manifests(EventLog(), frozenset(), batch_size=sizes),
        Artifact(MODEL, folder, 1),
    )
    manifests.read(MODEL, artifact)
    load = manifests.load_request(MODEL, artifact)
    (folder / "modelhost.toml").unlink()
    manifests.read(MODEL, artifact)
    assert (load.max_batch_size, manifests.load_request(MODEL, artifact).max_batch_size) == (5, 7)
    ours, theirs = socket.socketpair()
    with ours, theirs:
        worker = Worker(ours, 1, threads=1)
        worker.load(load)
        assert worker.batch_sizes == {MODEL: 5}
        worker.unload(Unload(MODEL))
        assert worker.batch_sizes == {}


def tenant_batch(model: str, tenant: str, body: bytes, weight: float = 1.0) -> tuple[Infer, bytes]:
    item = Item("text/plain", "text/plain", {}, len(body))
    return Infer(model, (item,), tenant=tenant, weight=weight), body


def test_a_tenants_one_batch_goes_ahead_of_anothers_backlog() -> None:
    """Whoever sent them (a front, the main process), a quiet tenant's batch waits behind no
    noisy tenant's backlog of batches for other models."""
    echo = Echo()
    gathering = Gathering(1, lambda model: 8, echo)
    noisy = [tenant_batch(f"m{i}", "noisy", b"n%d" % i) for i in range(3)]
    list(waiting_in_turn(gathering, *noisy, tenant_batch("q", "quiet", b"q")))
    assert echo.batches[0] == [b"q"]
    assert sorted(echo.batches[1:]) == [[b"n0"], [b"n1"], [b"n2"]]


def test_waiting_tenants_get_the_slot_in_the_ratio_of_their_weights() -> None:
    """Weights 1 and 3, each with batches of equal cost waiting: the first eight go 2 : 6."""
    echo = Echo(infer_ms=9.0)
    gathering = Gathering(1, lambda model: 8, echo)
    batches = [
        tenant_batch(f"{weight}-{i}", str(weight), b"%d" % weight, weight)
        for i in range(8)
        for weight in (1, 3)
    ]
    list(waiting_in_turn(gathering, *batches))
    heavier = sum(batch == [b"3"] for batch in echo.batches[:8])
    assert 5 <= heavier <= 7, echo.batches


def test_a_tenants_batches_gather_only_with_their_own() -> None:
    """Two tenants' batches of one model run as two groups: one is not charged the other's."""
    echo = Echo()
    gathering = Gathering(1, lambda model: 8, echo)
    requests = tenant_batch(MODEL, "a", b"a"), tenant_batch(MODEL, "b", b"b")
    list(waiting_in_turn(gathering, *requests, tenant_batch(MODEL, "a", b"c")))
    assert sorted(echo.batches) == [[b"a", b"c"], [b"b"]]
