"""The host under any interleaving (`machine.py`), and the interleavings it once found, kept as
plain tests."""

from __future__ import annotations

import time

from host.fakes import NAMES
from host.machine import Interleavings, Step, arrives, checked, replay, runs_of_30_steps
from modelhost.workers.messages import Load

Interleavings.TestCase.settings = runs_of_30_steps(400)
TestResidencyUnderAnyInterleaving = Interleavings.TestCase


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


def test_no_copy_where_one_is_unloading() -> None:
    """No copy is loaded on a worker still unloading a copy of the model."""
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


def test_deleted_model_holds_memory_until_gone() -> None:
    """A model being unloaded counts against the budget until its worker lets it go."""
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


def test_put_does_not_spin_on_ended_copy() -> None:
    """A PUT in the turn a copy's load ends does not await the ended task for ever."""
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),  # loaded on worker 1; its batch waits
            ("put_min_worker", {"name": "b", "copies": 2}),  # a copy loads on worker 2
            arrives("put", "b", call=1, fails=True),
        ]
    )


def test_put_with_failed_copy_answers() -> None:
    """A failed copy is not retried in a loop; the PUT answers with the copies there are."""
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


def test_request_during_delete_never_runs_unloaded() -> None:
    """A request arriving just as a DELETE stops waiting never runs on the unloading model."""
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),  # loaded; its request runs
            ("delete", {"name": "b"}),  # waits for that request
            arrives("request", "b", call=0, turns=2),
            ("answer_a_call", {"index": 1}),  # the unload, before the new request's batch
        ]
    )


def test_queued_requests_fail_when_delete_loses_worker() -> None:
    """Requests queued for a model being deleted fail when its only worker dies."""
    replay(
        [
            ("request", {"name": "a"}),
            arrives("request", "a", call=0),
            ("delete", {"name": "a"}),
            ("kill_a_worker", {"respawn": False, "worker": 0}),
        ]
    )


class Counted(Interleavings):
    """The host's machine with one more invariant, which counts its checks."""

    checks = 0

    @checked
    def counted(self) -> None:
        type(self).checks += 1


def test_replay_checks_every_invariant_a_subclass_adds() -> None:
    """An invariant is registered once, by `@checked`: replay runs it as Hypothesis does."""
    replay([("time_passes", {"seconds": 0.5}), ("request", {"name": "a"})], Counted)
    assert Counted.checks == 2


def test_a_slow_host_runs_the_steps_as_a_fast_one() -> None:
    """The dispatcher's pressure recheck is a loop timer. On the wall clock, a host busy enough
    to take 0.1 s over a step fired it where a fast run did not, and Hypothesis found its own
    replay flaky (CI runs the machines beside other tests): the loop keeps the machine's clock."""
    steps = [
        ("request", {"name": "b"}),
        ("answer_a_call", {"index": 0}),  # loaded; its first batch runs
        ("time_passes", {"seconds": 0.5}),
        ("request", {"name": "b"}),  # waits: the busy model scales out
        ("a_call_fails", {"index": 1}),  # the copy's load fails; the request still waits
        ("request", {"name": "b"}),
    ]
    assert calls_after_each(steps, slow=False) == calls_after_each(steps, slow=True)


def calls_after_each(steps: list[Step], slow: bool) -> list[list[tuple[str, int]]]:
    """The calls the workers hold after each step; `slow`: each settling 0.15 s late."""
    machine = Interleavings()
    settle = machine.settle
    if slow:
        machine.settle = lambda: (time.sleep(0.15), settle())  # type: ignore[method-assign]
    held = []
    try:
        for rule_name, arguments in steps:
            getattr(machine, rule_name)(**arguments)
            calls = machine.pool.calls
            held.append(sorted((type(c.request).__name__, c.worker.worker_id) for c in calls))
    finally:
        machine.teardown()
    return held
