"""A worker's calls and device moves of its models under any interleaving: no call runs while
its model moves, a call waits only behind a move of its model, and a move only for that
model's calls under way (the H200's 500s: a copy moved while a call of it ran)."""

from __future__ import annotations

import sys
import threading
import time

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from modelhost.workers.device_moves import ModelUse

WAIT_S = 10.0
SETTLE_S = 2.0
MODELS = ("m0", "m1")


class Held:
    """A call or a move on a thread of its own, held inside until let go."""

    def __init__(self, use: ModelUse, kind: str, model: str) -> None:
        self.kind, self.model = kind, model
        self.inside, self.go = False, threading.Event()
        enter = use.call if kind == "call" else use.move
        self.thread = threading.Thread(target=self._run, args=(enter,), daemon=True)
        self.thread.start()

    def _run(self, enter: object) -> None:
        with enter(self.model):  # type: ignore[operator]
            self.inside = True
            self.go.wait(WAIT_S)
            self.inside = False

    def settled(self) -> bool:
        """Ended, held inside, or waiting to enter: only another thread can move it now."""
        if not self.thread.is_alive():
            return True
        frame = sys._current_frames().get(self.thread.ident or 0)
        while frame is not None:
            if frame.f_code.co_name == "wait":
                return True
            frame = frame.f_back
        return False


class Interleavings(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.use = ModelUse()
        self.held: list[Held] = []

    def live(self, kind: str) -> list[Held]:
        return [h for h in self.held if h.kind == kind and h.thread.is_alive()]

    @rule(model=st.sampled_from(MODELS))
    def call(self, model: str) -> None:
        self.held.append(Held(self.use, "call", model))

    @precondition(lambda self: not self.live("move"))  # moves run on the unloader thread alone
    @rule(model=st.sampled_from(MODELS))
    def move(self, model: str) -> None:
        self.held.append(Held(self.use, "move", model))

    @rule(kind=st.sampled_from(("call", "move")), pick=st.integers(0, 7))
    def end(self, kind: str, pick: int) -> None:
        inside = [h for h in self.live(kind) if h.inside]
        if inside:
            released = inside[pick % len(inside)]
            released.go.set()
            released.thread.join(WAIT_S)

    @invariant()
    def kept_apart(self) -> None:
        """Once every thread has run or waits; a thread just woken still shows its wait, so
        the state is read until it holds or SETTLE_S has passed."""
        deadline = time.monotonic() + SETTLE_S
        while (wrong := self.wrong()) and time.monotonic() < deadline:
            time.sleep(0.0005)
        assert not wrong, wrong

    def wrong(self) -> str:
        if not all(h.settled() for h in self.held):
            return "a thread neither ran nor waited"
        moves, calls = self.live("move"), self.live("call")
        for h in calls:
            moving = [m for m in moves if m.model == h.model]
            if h.inside and any(m.inside for m in moving):
                return f"a call of {h.model} ran during its move"
            if not (h.inside or moving):
                return f"a call of {h.model} waited with no move of it"
        for m in moves:
            if not (m.inside or any(h.model == m.model and h.inside for h in calls)):
                return f"a move of {m.model} waited with no call of it"
        return ""

    def teardown(self) -> None:
        for h in self.held:
            h.go.set()
        for h in self.held:
            h.thread.join(WAIT_S)


Interleavings.TestCase.settings = settings(max_examples=60, stateful_step_count=12, deadline=None)
test_model_use_interleavings = Interleavings.TestCase
