"""The host's residency under any interleaving: a Hypothesis state machine drives the real ModelHost
and MemoryTier against a fake worker pool (`fakes.py`) whose calls finish, fail or lose their
worker in whatever order Hypothesis picks (workers dying, and their successors forked at once or
later), while requests, DELETEs, TorchServe's PUT of a model's copies, idle unloads, scale-in and
the server's shutdown overlap on few models.

Checked after every step (each `@checked` method, in Hypothesis's runs and in `replay` alike):
committed memory never exceeds the budget, nor does what the workers really hold, a load under
way counted at its peak; no worker is asked to load a model it holds (two loads of one copy), nor
two models at once (a load queued behind another would hold memory it cannot use yet); every
record's workers really hold the model. At the end, with every call answered, every request has
been answered exactly once, with an answer or a documented ModelhostError (never a KeyError or
AssertionError).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from host.fakes import (
    BUDGET_BYTES,
    INVOCATION,
    NAMES,
    POOL_SIZE,
    Call,
    FakeDisk,
    FakeEvents,
    FakePool,
    ManualClock,
    footprint_of,
    tmp_dir,
)
from modelhost.cache.devices import DeviceTier
from modelhost.cache.memory import MemoryBudget, MemoryTier, State
from modelhost.errors import ModelhostError
from modelhost.host import ModelHost
from modelhost.host.memory_readings import PssReading
from modelhost.scheduler import SchedulerSettings
from modelhost.workers.messages import Load, Unload

Step = tuple[str, dict[str, Any]]  # a rule's name and its arguments
F = TypeVar("F", bound=Callable[..., None])
CHECKED = "checked_after_every_step"


def checked(function: F) -> F:
    """An invariant: Hypothesis checks it after every step, and so does `replay`."""
    setattr(function, CHECKED, True)
    return invariant()(function)


class ClockedLoop(asyncio.SelectorEventLoop):
    """An event loop whose timers keep the machine's clock: a slow host fires none that a fast
    one would not (the dispatcher's pressure recheck is such a timer)."""

    def __init__(self, clock: ManualClock) -> None:
        super().__init__()
        self.clock = clock

    def time(self) -> float:
        return self.clock.now


class Interleavings(RuleBasedStateMachine):
    footprint = staticmethod(footprint_of)  # of each model, as its loads measure it
    scheduling = SchedulerSettings(response_timeout_s=1e9, scale_in_idle_s=5.0)
    tenant_of: Callable[[str], str] | None = None  # whose each model is; None: no tenants

    def __init__(self) -> None:
        super().__init__()
        self.clock = ManualClock()
        self.loop = ClockedLoop(self.clock)
        self.pool = self.make_pool(POOL_SIZE)
        self.memory = self.make_memory()
        root = self.root = Path(self.loop.run_until_complete(asyncio.to_thread(tmp_dir)))
        self.host = ModelHost(
            self.pool,
            self.memory,
            FakeDisk(root, self.footprint),
            FakeEvents(),
            pinned=frozenset(),
            deadline_s=1e9,
            clock=self.clock,
            scheduling=self.scheduling,
            pss_bytes=self.read_pss,
            model_tenant=self.tenant_of,
            devices=self.make_devices(),
        )
        self.pool.attach(
            on_lost=self.host.residency.worker_lost, on_joined=self.host.changes.notify
        )  # as the composition root does
        self.requests: list[asyncio.Task[Any]] = []
        self.chores: list[asyncio.Task[Any]] = []

    def make_pool(self, size: int) -> FakePool:
        return FakePool(size, self.footprint)

    def make_devices(self) -> DeviceTier | None:
        """None: no device holds models (a subclass gives its devices)."""
        return None

    def make_memory(self) -> MemoryTier:
        return MemoryTier(MemoryBudget(BUDGET_BYTES, 0), clock=self.clock)

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
            self.pool.drop(call.worker, call.request.model)
        call.future.set_exception(ModelhostError("the handler raised"))

    @rule(name=st.sampled_from(NAMES), copies=st.integers(0, 2), limit=st.integers(0, 2))
    def put_min_worker(self, name: str, copies: int, limit: int = 0) -> None:
        """PUT ?min_worker=copies&max_worker=limit (0: none given)."""
        self.start(self.host.scale_workers(name, copies, limit), self.chores)

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
        self.host.changes.close()
        self.settle()

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        self.start(self.host.residency.unload(name), self.chores)

    @rule(seconds=st.sampled_from([0.5, 2.0, 10.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds
        self.settle()

    @rule()
    def idle_unload(self) -> None:
        self.start(self.host.residency.unload_idle(3.0), self.chores)

    @rule()
    def scale_in(self) -> None:
        self.start(self.host.scaling.scale_in(), self.chores)

    @checked
    def never_over_budget(self) -> None:
        assert self.memory.committed_bytes <= self.memory.budget.budget_bytes

    @checked
    def workers_never_hold_more_than_the_budget(self) -> None:
        assert self.pool.held_bytes() <= self.memory.budget.budget_bytes, self.memory.residents

    @checked
    def no_worker_loads_a_model_twice(self) -> None:
        assert not self.pool.violations

    @checked
    def one_load_at_a_time_per_worker(self) -> None:
        loading = [c.worker.worker_id for c in self.pool.calls if isinstance(c.request, Load)]
        assert len(loading) == len(set(loading)), loading

    @checked
    def loaded_records_name_workers_that_hold_them(self) -> None:
        for resident in self.memory:
            if resident.state is State.LOADED:
                assert resident.workers, f"{resident.name} is loaded on no worker"
                for worker_id in resident.workers:
                    worker = self.pool.workers.get(worker_id)
                    assert worker is not None and resident.name in worker.models, resident

    def run_steps(self, steps: list[Step]) -> None:
        """Run rules by name, checking every invariant after each, as Hypothesis does."""
        for rule_name, arguments in steps:
            getattr(self, rule_name)(**arguments)
            self.check_invariants_once()

    def check_invariants_once(self) -> None:
        """Every `@checked` invariant of this machine, its subclasses' included."""
        for _, check in inspect.getmembers(self, lambda member: getattr(member, CHECKED, False)):
            check()

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


def runs_of_30_steps(max_examples: int) -> settings:
    """Hypothesis settings for a machine of the host: `max_examples` runs (times
    MACHINE_EXAMPLES_FACTOR, for a longer search), no deadline."""
    return settings(
        max_examples=max_examples * int(os.environ.get("MACHINE_EXAMPLES_FACTOR", "1")),
        stateful_step_count=30,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )


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
