"""The host's residency under any interleaving: a Hypothesis state machine drives the real ModelHost
and MemoryTier against a fake worker pool whose calls finish, fail or lose their worker in whatever
order Hypothesis picks (workers dying, and their successors forked at once or later), while
requests, DELETEs, TorchServe's PUT of a model's copies, idle unloads, scale-in and the server's
shutdown overlap on few models.

Checked after every step: committed memory never exceeds the budget, nor does what the workers
really hold, a load under way counted at its peak; no worker is asked to load a
model it holds (two loads of one copy), nor two models at once (a load queued behind another would
hold memory it cannot use yet); every record's workers really hold the model. At the end,
with every call answered, every request has been answered exactly once, with an answer or a
documented ModelhostError (never a KeyError or AssertionError).
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from modelhost.cache.disk import Artifact
from modelhost.cache.memory import MemoryTier, State
from modelhost.errors import ModelhostError, ModelNotLoaded, WorkerDied
from modelhost.host import Invocation, ModelHost
from modelhost.host.memory_readings import PssReading
from modelhost.scheduler import SchedulerSettings
from modelhost.workers.messages import (
    Answer,
    Answered,
    Load,
    Loaded,
    Reply,
    Request,
    Unload,
    Unloaded,
)

MiB = 2**20
NAMES = ("a", "b", "c", "d")
ARTIFACT_BYTES = 10 * MiB  # reserved at 2x + 64 KiB before the first load
FOOTPRINT_BYTES = 12 * MiB  # what a load measures
PEAK_SHARE = 1.5  # what a load needs while it runs (unpickling), as the worker measures it
BUDGET_BYTES = 64 * MiB  # room for two or three models, not all four
POOL_SIZE = 2
Step = tuple[str, dict[str, Any]]  # a rule's name and its arguments
INVOCATION = Invocation(b"[1]", "application/json", "")


class ManualClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass(eq=False)
class FakeWorker:
    worker_id: int
    pid: int = 0
    alive: bool = True
    pending: dict[int, Any] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)


@dataclass
class Call:
    worker: FakeWorker
    request: Request
    future: asyncio.Future[tuple[Reply, bytes]]


def footprint_of(name: str) -> int:
    return FOOTPRINT_BYTES


class FakePool:
    """Calls wait until the machine answers them; a worker that dies fails its calls."""

    def __init__(self, size: int, footprint: Callable[[str], int] = footprint_of) -> None:
        self.footprint = footprint
        self._ids = itertools.count(1)
        self.workers: dict[int, FakeWorker] = {}
        self.calls: list[Call] = []
        self.violations: list[str] = []
        self.pure = False  # what loads say of their handler
        self._on_lost: Any = lambda worker: None
        self._on_joined: Any = lambda: None
        for _ in range(size):
            self.spawn()

    def attach(self, on_lost: Any, on_joined: Any) -> None:
        self._on_lost, self._on_joined = on_lost, on_joined

    def spawn(self) -> None:
        worker = FakeWorker(next(self._ids))
        self.workers[worker.worker_id] = worker
        self._on_joined()

    def pids(self) -> list[int]:
        return []

    def send(
        self, worker: FakeWorker, request: Request, payload: bytes = b"", model: str = ""
    ) -> asyncio.Future[tuple[Reply, bytes]]:
        if not worker.alive:
            raise WorkerDied(f"worker {worker.worker_id} has died; retry is safe")
        if isinstance(request, Load) and request.model in worker.models:
            self.violations.append(f"second load of {request.model} on {worker.worker_id}")
        future: asyncio.Future[tuple[Reply, bytes]] = asyncio.get_running_loop().create_future()
        self.calls.append(Call(worker, request, future))
        self.called(self.calls[-1])
        return future

    async def call(
        self,
        worker: FakeWorker,
        request: Request,
        expect: type[Any],
        payload: bytes = b"",
        model: str = "",
    ) -> tuple[Any, bytes]:
        reply, body = await self.send(worker, request, payload, model)
        assert isinstance(reply, expect)
        return reply, body

    def called(self, call: Call) -> None:
        """A call was made; it waits for `answer` (a subclass may answer it here)."""

    def answer(self, call: Call) -> None:
        self.calls.remove(call)
        request, worker = call.request, call.worker
        reply: Reply
        if isinstance(request, Load):
            worker.models.add(request.model)
            name = request.model
            footprint, peak = self.footprint(name), self.peak(name)
            reply = Loaded(footprint, 1.0, batches=True, peak=peak, pure=self.pure)
        elif isinstance(request, Unload):
            if request.model not in worker.models:
                missing = f"{request.model} not in {worker.worker_id}"
                call.future.set_exception(ModelNotLoaded(missing))
                return
            worker.models.discard(request.model)
            reply = Unloaded(self.footprint(request.model))
        else:
            if request.model not in worker.models:
                self.violations.append(
                    f"infer of {request.model} on {worker.worker_id}, lacking it"
                )
            answers = (Answer("text/plain", 2),) * len(request.items)
            call.future.set_result((Answered(answers, 1.0), b"ok" * len(answers)))
            return
        call.future.set_result((reply, b""))

    def peak(self, name: str) -> int:
        return int(self.footprint(name) * PEAK_SHARE)

    def held_bytes(self) -> int:
        """What the workers really hold: each model they hold, and each load under way at its
        peak."""
        held = sum(self.footprint(m) for worker in self.workers.values() for m in worker.models)
        loads = [c.request.model for c in self.calls if isinstance(c.request, Load)]
        return held + sum(self.peak(name) for name in loads)

    def kill(self, worker: FakeWorker, respawn: bool = True) -> None:
        """The worker dies; the template forks its successor at once, or later (`spawn`)."""
        worker.alive = False
        del self.workers[worker.worker_id]
        for call in [c for c in self.calls if c.worker is worker]:
            self.calls.remove(call)
            call.future.set_exception(WorkerDied(f"worker {worker.worker_id} died"))
        self._on_lost(worker)
        if respawn:
            self.spawn()


@dataclass
class Materialized:
    artifact: Artifact
    tier: str = "disk"
    download_ms: float = 0.0


class FakeDisk:
    """Every model is on disk already: the disk tier is not what this machine explores."""

    def __init__(self, root: Path, footprint: Callable[[str], int] = footprint_of) -> None:
        self.root = root
        self.footprint = footprint  # an artifact is to its footprint as ARTIFACT_BYTES is
        self._artifacts: dict[str, Artifact] = {}
        self.budget_bytes = 1 << 40
        self.stores = type("Stores", (), {"url_of": staticmethod(lambda name: f"file:///{name}")})

    async def materialize(self, name: str, url: str) -> Materialized:
        path = self.root / name
        path.touch()
        size = self.footprint(name) * ARTIFACT_BYTES // FOOTPRINT_BYTES
        self._artifacts[name] = Artifact(name, path, size)
        return Materialized(self._artifacts[name])

    async def version(self, url: str) -> str:
        return "1"  # never replaced: what a failed load would be remembered by

    def get(self, name: str) -> Artifact | None:
        return self._artifacts.get(name)

    def names(self, after: str = "", limit: int = 100) -> list[str]:
        return sorted(name for name in self._artifacts if name > after)[:limit]

    def count(self) -> int:
        return len(self._artifacts)

    @property
    def used_bytes(self) -> int:
        return sum(artifact.bytes for artifact in self._artifacts.values())

    def revalidation_due(self, name: str) -> bool:
        return False

    def offer_fast_copy(self, artifact: Artifact) -> None:
        return None  # fast copies are the disk tier's and the worker's (tests/cache, e2e)

    def delete(self, name: str, reason: str) -> None:
        self._artifacts.pop(name, None)


class FakeEvents:
    def emit(self, *args: Any, **kwargs: Any) -> None:
        pass

    def subscribe(self, subscriber: Any) -> Any:
        return lambda: None


class Interleavings(RuleBasedStateMachine):
    footprint = staticmethod(footprint_of)  # of each model, as its loads measure it

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock()
        self.pool = FakePool(POOL_SIZE, self.footprint)
        self.memory = self.make_memory()
        root = self.root = Path(self.loop.run_until_complete(asyncio.to_thread(_tmp_dir)))
        scheduling = SchedulerSettings(response_timeout_s=1e9, scale_in_idle_s=5.0)
        self.host = ModelHost(
            self.pool,  # type: ignore[arg-type]
            self.memory,
            FakeDisk(root, self.footprint),  # type: ignore[arg-type]
            FakeEvents(),  # type: ignore[arg-type]
            pinned=frozenset(),
            deadline_s=1e9,
            clock=self.clock,
            scheduling=scheduling,
            pss_bytes=self.read_pss,
        )
        self.pool.attach(
            on_lost=self.host.residency.worker_lost, on_joined=self.host.residency.notify
        )  # as the composition root does
        self.requests: list[asyncio.Task[Any]] = []
        self.chores: list[asyncio.Task[Any]] = []

    def make_memory(self) -> MemoryTier:
        return MemoryTier(BUDGET_BYTES, 0, clock=self.clock)

    def read_pss(self) -> int | PssReading:
        """The server's PSS as the fake workers make it: what the records say they hold."""
        return sum(r.bytes for r in self.memory)

    def settle(self) -> None:
        for _ in range(10):
            self.loop.run_until_complete(asyncio.sleep(0))

    def start(self, coroutine: Any, into: list[asyncio.Task[Any]]) -> None:
        into.append(self.loop.create_task(coroutine))
        self.settle()

    @rule(name=st.sampled_from(NAMES))
    def request(self, name: str) -> None:
        self.start(self.host.invoke(name, INVOCATION), self.requests)

    @precondition(lambda self: self.pool.calls)
    @rule(index=st.integers(0, 50))
    def answer_a_call(self, index: int) -> None:
        self.pool.answer(self.pool.calls[index % len(self.pool.calls)])
        self.settle()

    @precondition(lambda self: self.pool.calls)
    @rule(index=st.integers(0, 50))
    def a_call_fails(self, index: int) -> None:
        self.fail(self.pool.calls[index % len(self.pool.calls)])
        self.settle()

    def fail(self, call: Call) -> None:
        self.pool.calls.remove(call)
        if isinstance(call.request, Unload):  # the worker drops the model before close() raises
            call.worker.models.discard(call.request.model)
        call.future.set_exception(ModelhostError("the handler raised"))

    @rule(name=st.sampled_from(NAMES), copies=st.integers(0, 2))
    def put_min_worker(self, name: str, copies: int) -> None:
        self.start(self.host.scale_workers(name, copies, 0), self.chores)

    @precondition(lambda self: self.pool.calls)
    @rule(
        index=st.integers(0, 50),
        fails=st.booleans(),
        turns=st.integers(0, 6),
        what=st.sampled_from(["request", "put"]),
        name=st.sampled_from(NAMES),
    )
    def something_arrives_as_a_call_ends(
        self, index: int, fails: bool, turns: int, what: str, name: str
    ) -> None:
        """A request or a PUT ?min_worker=2 arrives `turns` turns of the loop after a call
        ends: in the midst of what the call's end sets going, not only once it has settled."""
        call = self.pool.calls[index % len(self.pool.calls)]
        self.fail(call) if fails else self.pool.answer(call)
        for _ in range(turns):
            self.loop.call_soon(self.loop.stop)
            self.loop.run_forever()  # one turn
        if what == "put":
            self.chores.append(self.loop.create_task(self.host.scale_workers(name, 2, 0)))
        else:
            self.requests.append(self.loop.create_task(self.host.invoke(name, INVOCATION)))
        self.settle()

    @precondition(lambda self: self.pool.workers)
    @rule(worker=st.integers(0, 1), respawn=st.booleans())
    def kill_a_worker(self, worker: int, respawn: bool = True) -> None:
        workers = list(self.pool.workers.values())
        self.pool.kill(workers[worker % len(workers)], respawn)
        self.settle()

    @precondition(lambda self: len(self.pool.workers) < POOL_SIZE)
    @rule()
    def a_worker_joins(self) -> None:
        self.pool.spawn()
        self.settle()

    @rule()
    def shutdown(self) -> None:
        """The server drains: no request starts; what is under way finishes."""
        self.host.close()
        self.settle()

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        self.start(self.host.unload(name), self.chores)

    @rule(seconds=st.sampled_from([0.5, 2.0, 10.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds
        self.settle()

    @rule()
    def idle_unload(self) -> None:
        self.start(self.host.unload_idle(3.0), self.chores)

    @rule()
    def scale_in(self) -> None:
        self.start(self.host.scale_in(), self.chores)

    @invariant()
    def never_over_budget(self) -> None:
        assert self.memory.committed_bytes <= self.memory.budget_bytes

    @invariant()
    def workers_never_hold_more_than_the_budget(self) -> None:
        assert self.pool.held_bytes() <= self.memory.budget_bytes, self.memory.residents

    @invariant()
    def no_worker_loads_a_model_twice(self) -> None:
        assert not self.pool.violations

    @invariant()
    def one_load_at_a_time_per_worker(self) -> None:
        loading = [c.worker.worker_id for c in self.pool.calls if isinstance(c.request, Load)]
        assert len(loading) == len(set(loading)), loading

    @invariant()
    def loaded_records_name_workers_that_hold_them(self) -> None:
        for resident in self.memory:
            if resident.state is State.LOADED:
                for worker_id in resident.workers:
                    worker = self.pool.workers.get(worker_id)
                    assert worker is not None and resident.name in worker.models, resident

    def run_steps(self, steps: list[Step]) -> None:
        """Run rules by name, checking every invariant after each, as Hypothesis does."""
        for rule_name, arguments in steps:
            getattr(self, rule_name)(**arguments)
            self.never_over_budget()
            self.workers_never_hold_more_than_the_budget()
            self.no_worker_loads_a_model_twice()
            self.one_load_at_a_time_per_worker()
            self.loaded_records_name_workers_that_hold_them()

    def teardown(self) -> None:
        try:
            while len(self.pool.workers) < POOL_SIZE:  # the template forks the missing ones
                self.pool.spawn()
            for _ in range(500):  # answer everything, so every request can finish
                if not self.pool.calls:
                    self.settle()
                    if not self.pool.calls:
                        break
                    continue
                self.pool.answer(self.pool.calls[0])
                self.settle()
            for task in self.requests:
                assert task.done(), "a request was never answered"
                error = task.exception()
                assert error is None or isinstance(error, ModelhostError), repr(error)
            assert not self.pool.violations, self.pool.violations
            for task in self.chores:
                assert task.done(), "a DELETE, PUT, idle unload or scale-in never finished"
                error = task.exception()
                assert error is None or isinstance(error, ModelhostError), repr(error)
        finally:
            for task in asyncio.all_tasks(self.loop):
                task.cancel()
            self.loop.run_until_complete(asyncio.sleep(0))
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)  # one folder per example, else /tmp fills


def _tmp_dir() -> str:
    import tempfile

    return tempfile.mkdtemp(prefix="interleavings-")


def runs_of_30_steps(max_examples: int) -> settings:
    """Hypothesis settings for a machine of the host: `max_examples` runs, no deadline."""
    return settings(
        max_examples=max_examples,
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


Interleavings.TestCase.settings = runs_of_30_steps(400)
TestResidencyUnderAnyInterleaving = Interleavings.TestCase


def arrives(what: str, name: str, call: int, fails: bool = False, turns: int = 0) -> Step:
    """A step: a request or a PUT of `name` arrives `turns` turns after call `call` ends."""
    arguments = {"what": what, "name": name, "index": call, "fails": fails, "turns": turns}
    return ("something_arrives_as_a_call_ends", arguments)


def replay(steps: list[Step], machine_class: type[Interleavings] | None = None) -> None:
    """Run one sequence of the machine's rules, checking its invariants after each, then its
    teardown: the interleavings Hypothesis once found, kept as plain tests."""
    machine = (machine_class or Interleavings)()
    try:
        machine.run_steps(steps)
    finally:
        machine.teardown()


def test_two_scale_ins_draining_one_copy_both_finish() -> None:
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),  # loaded; its first batch runs
            ("time_passes", {"seconds": 0.5}),
            ("request", {"name": "b"}),  # waits: the busy model scales out
            ("answer_a_call", {"index": 1}),  # the copy is loaded and takes the batch
            ("time_passes", {"seconds": 10.0}),
            ("scale_in", {}),  # drains the busy copy
            ("time_passes", {"seconds": 10.0}),
            ("scale_in", {}),  # drains it too
        ]
    )


def test_no_copy_is_loaded_where_a_copy_is_still_being_unloaded() -> None:
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),
            ("time_passes", {"seconds": 0.5}),
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 1}),
            ("a_call_fails", {"index": 1}),  # the copy's batch fails: the copy is idle
            ("time_passes", {"seconds": 10.0}),
            ("scale_in", {}),  # the copy's unload is under way on worker 2
            ("request", {"name": "b"}),  # pressure again: no new copy on worker 2 meanwhile
        ]
    )


def test_a_model_being_deleted_holds_its_memory_until_it_is_gone() -> None:
    """Found by the machine: the record of a model being unloaded (not for a load) stopped
    counting when its unload began, so a load could start while its worker still held it."""
    loads_of_all_four = [
        (rule, {"name": name} if rule == "request" else {"index": 0})
        for name in NAMES
        for rule in ("request", "answer_a_call", "answer_a_call")  # loaded, then answered
    ]
    replay(
        [
            *loads_of_all_four,  # 48 of 64 MiB
            ("delete", {"name": "a"}),  # its unload waits for its worker
            ("request", {"name": "b"}),  # b's batch runs
            ("time_passes", {"seconds": 0.5}),
            ("request", {"name": "b"}),  # b is busy: a copy, 18 MiB at its peak, if it fits
        ]
    )


def test_a_put_arriving_as_a_copy_fails_does_not_spin_on_the_ended_copy() -> None:
    """Found on CI (tests/e2e/test_migration_effects.py): a PUT ?min_worker that ran in the turn
    a copy's load ended, before the copy's done-callback had forgotten it, awaited the ended task
    (which returns at once) again and again, and the server's loop spun for ever."""
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),  # loaded on worker 1; its batch waits
            ("put_min_worker", {"name": "b", "copies": 2}),  # a copy loads on worker 2
            arrives("put", "b", call=1, fails=True),
        ]
    )


def test_a_put_whose_copy_fails_answers_with_the_copies_there_are() -> None:
    """A copy that fails is not tried again in a loop (a load that kills its worker would
    kill one worker after another): the PUT answers with the copies the model has."""
    machine = Interleavings()
    try:
        machine.run_steps(
            [
                ("request", {"name": "b"}),
                ("answer_a_call", {"index": 0}),
                ("put_min_worker", {"name": "b", "copies": 2}),
            ]
        )
        [copy] = [call for call in machine.pool.calls if isinstance(call.request, Load)]
        machine.fail(copy)
        machine.settle()
        put = machine.chores[-1]
        assert put.done() and put.result() == 1
        assert not [call for call in machine.pool.calls if isinstance(call.request, Load)]
    finally:
        machine.teardown()


def test_a_request_arriving_as_a_delete_stops_waiting_never_runs_on_an_unloaded_model() -> None:
    """Found by the machine once requests could arrive a few turns after a call ended: the last
    request in flight ended, the DELETE's wait saw no request in flight, and in the turns before
    it began to unload a new request started on the model; the worker unloaded the model under
    it (a 404 "not loaded in worker" in the e2e churn test with an operator beside it)."""
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),  # loaded; its request runs
            ("delete", {"name": "b"}),  # waits for that request
            arrives("request", "b", call=0, turns=2),
            ("answer_a_call", {"index": 1}),  # the unload, before the new request's batch
        ]
    )


def test_requests_queued_for_a_model_being_deleted_fail_over_when_its_worker_dies() -> None:
    """Found by the machine once a DELETE closed its model to new requests at once: the model's
    only worker died while a request waited in its queue and the DELETE waited for that request;
    the request waited for a worker that would never serve it, and the DELETE for the request."""
    replay(
        [
            ("request", {"name": "a"}),
            arrives("request", "a", call=0),
            ("delete", {"name": "a"}),
            ("kill_a_worker", {"respawn": False, "worker": 0}),
        ]
    )
