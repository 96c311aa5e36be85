"""The worker's gathering under any interleaving of the two kinds of sender (the main process's,
waiting on its thread; a front's, waiting as data) and of batches ending: no more batches run
than slots, none waits while a slot is free, groups keep to one model, tenant and batch size,
and every batch gets its own outcome once."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from modelhost.workers.gather import Gathering, Outcome
from modelhost.workers.messages import Answer, Answered, Infer, Item

WAIT_S = 10.0
MODELS = ("m0", "m1", "broken")
TENANTS = ("a", "b")
WAITS = {"_lead", "_follow", "run"}  # where a thread waits for another (not a thread's start)


class Run:
    """A batch in the model: its ids, model and tenant, held until let go."""

    def __init__(self, request: Infer, payload: bytes) -> None:
        self.ids = [int(part) for part in payload.split(b",") if part]
        self.model, self.tenant, self.items = request.model, request.tenant, len(request.items)
        self.go = threading.Event()


def blocked(thread: threading.Thread) -> bool:
    """Whether `thread` has ended, or waits on an event nobody has set: only another may move it."""
    if not thread.is_alive():
        return True
    frame = sys._current_frames().get(thread.ident or 0)
    while frame is not None:
        waited, caller = frame.f_locals.get("self"), frame.f_back
        if isinstance(waited, threading.Event) and caller and caller.f_code.co_name in WAITS:
            return not waited.is_set()
        frame = caller
    return False


class Interleavings(RuleBasedStateMachine):
    @initialize(slots=st.integers(1, 2), limit=st.integers(1, 3))
    def begin(self, slots: int, limit: int) -> None:
        self.slots, self.limit = slots, limit
        self.gathering = Gathering(slots, lambda model: limit, self.run, self.spawn)
        self.threads: list[threading.Thread] = []
        self.runs: list[Run] = []
        self.sent: dict[int, Infer] = {}
        self.outcomes: dict[int, list[Any]] = {}

    def spawn(self, target: Any) -> None:
        thread = threading.Thread(target=target, daemon=True)
        thread.start()  # then listed: a thread not started yet would pass for one ended
        self.threads.append(thread)

    def run(self, request: Infer, payload: bytes) -> tuple[Answered, bytes]:
        run = Run(request, payload)
        self.runs.append(run)
        run.go.wait(WAIT_S)
        if request.model == "broken":
            raise RuntimeError("the runtime broke")
        answers = tuple(Answer("text/plain", item.size) for item in request.items)
        return Answered(answers, 2.0 * len(answers)), payload

    def settle(self) -> None:
        deadline = time.monotonic() + WAIT_S
        while not all(blocked(thread) for thread in self.threads):
            assert time.monotonic() < deadline, "a thread neither waits nor ends"
            time.sleep(0.0005)

    def _batch(self, model: str, tenant: str, size: int) -> tuple[int, Infer, bytes]:
        number = len(self.sent)
        body = b"%d," % number
        items = tuple(Item("text/plain", "text/plain", {}, len(body)) for _ in range(size))
        weight = 3.0 if tenant == "b" else 1.0
        request = Infer(model, items, tenant=tenant, weight=weight)
        self.sent[number], self.outcomes[number] = request, []
        return number, request, body * size

    @rule(
        model=st.sampled_from(MODELS),
        tenant=st.sampled_from(TENANTS),
        size=st.integers(1, 2),
        here=st.booleans(),
    )
    def front_sends(self, model: str, tenant: str, size: int, here: bool) -> None:
        """`here`: from a door's reader with nothing else to read, which may run it itself."""
        number, request, body = self._batch(model, tenant, size)
        done = self.outcomes[number].append
        if here:
            self.spawn(lambda: self.gathering.send(request, body, done, here=True))
        else:
            self.gathering.send(request, body, done)
        self.settle()

    @rule(model=st.sampled_from(MODELS), tenant=st.sampled_from(TENANTS))
    def main_process_sends(self, model: str, tenant: str) -> None:
        number, request, body = self._batch(model, tenant, 1)

        def call() -> None:
            try:
                self.outcomes[number].append(self.gathering.infer(request, body))
            except RuntimeError as error:
                self.outcomes[number].append(error)

        self.spawn(call)
        self.settle()

    def running(self) -> list[Run]:
        return [run for run in self.runs if not run.go.is_set()]

    @precondition(lambda self: any(not run.go.is_set() for run in self.runs))
    @rule(pick=st.integers(0, 7))
    def a_batch_ends(self, pick: int) -> None:
        running = self.running()
        running[pick % len(running)].go.set()
        self.settle()

    @invariant()
    def no_more_run_than_slots_and_none_waits_for_a_free_one(self) -> None:
        if not hasattr(self, "gathering"):
            return
        running = len(self.running())
        assert running <= self.slots
        assert self.gathering.free == self.slots - running
        if self.gathering.waiting:
            assert running == self.slots

    @invariant()
    def groups_keep_to_one_model_tenant_and_batch_size(self) -> None:
        for run in getattr(self, "runs", []):
            assert len(set(run.ids)) == 1 or run.items <= self.limit
            assert {(self.sent[i].model, self.sent[i].tenant) for i in run.ids} == {
                (run.model, run.tenant)
            }

    def teardown(self) -> None:
        if not hasattr(self, "gathering"):
            return
        while self.running():
            for run in self.running():
                run.go.set()
            self.settle()
        for number, request in self.sent.items():
            assert len(self.outcomes[number]) == 1, (number, self.outcomes[number])
            self._check(number, request, self.outcomes[number][0])

    @staticmethod
    def _check(number: int, request: Infer, outcome: Outcome) -> None:
        if request.model == "broken":
            assert isinstance(outcome, RuntimeError)
            return
        assert not isinstance(outcome, BaseException)
        answered, body = outcome
        assert body == b"%d," % number * len(request.items)
        assert len(answered.answers) == len(request.items)


Interleavings.TestCase.settings = settings(max_examples=60, stateful_step_count=25, deadline=None)
test_the_gathering_under_interleavings = Interleavings.TestCase
