"""The host under any interleaving (`machine.py`), and the interleavings it once found, kept as
plain tests."""

from __future__ import annotations

from host.fakes import NAMES
from host.machine import Interleavings, arrives, checked, replay, runs_of_30_steps
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
