"""The host with devices under any interleaving: the host's machine (`machine.py`) with workers
whose loaded models can move to two fake devices, each move reporting the driver's count, its
moves answered, failed or lost with their worker in any order, beside loads, DELETEs, copies
(which go to the other device), idle unloads and scale-in.

Checked after every step, beside the host's own invariants: the device tier never charges more
than a device's budget, and what the fake workers really hold on each device (the models moved
there, each worker's context) never passes it either.
"""

from __future__ import annotations

from collections.abc import Callable

from host.fakes import Call, FakePool, FakeWorker, MiB, footprint_of
from host.machine import Interleavings, Step, arrives, checked, replay, runs_of_30_steps
from modelhost.cache.devices import DeviceMemory, DeviceTier
from modelhost.cache.policy import LRUPolicy
from modelhost.scheduler import SchedulerSettings
from modelhost.workers.messages import Answered, Infer, OnDevice, OnHost, ToDevice, ToHost

WEIGHTS_BYTES = 10 * MiB
CONTEXT_BYTES = 2 * MiB
DEVICE_BUDGET_BYTES = 25 * MiB  # a context and two models: a third sends one to sleep


class DevicePool(FakePool):
    """Fake workers whose models can use a device, and move there and back when told."""

    def __init__(self, size: int, footprint: Callable[[str], int] = footprint_of) -> None:
        super().__init__(size, footprint)
        self.loaded_extra = {"device_capable": True, "tensor_bytes": WEIGHTS_BYTES}
        self.on_device: dict[int, dict[str, str]] = {}  # by worker: model → device
        self.contexts: set[tuple[int, str]] = set()  # (worker, device): contexts made
        self.unmeasured: set[tuple[int, str]] = set()  # (worker, model): moved, no call yet
        self.measures: dict[object, tuple[int, int]] = {}  # by a call's future: the driver's
        # count, and what the worker's models there were charged

    def answer(self, call: Call) -> None:
        request, worker = call.request, call.worker
        placed = self.on_device.setdefault(worker.worker_id, {})
        if isinstance(request, ToDevice):
            self.calls.remove(call)
            if request.model not in worker.models:
                self.violations.append(f"move of {request.model} on {worker.worker_id}, lacking it")
            made = (worker.worker_id, request.device) not in self.contexts
            self.contexts.add((worker.worker_id, request.device))
            placed[request.model] = request.device
            self.unmeasured.add((worker.worker_id, request.model))
            driver = self.process_bytes(worker.worker_id, request.device)
            models = self.models_bytes(worker.worker_id, request.device)
            moved = OnDevice(WEIGHTS_BYTES, CONTEXT_BYTES if made else 0, 1.0, driver, models)
            call.future.set_result((moved, b""))
            return
        if isinstance(request, ToHost):
            self.calls.remove(call)
            device = placed.pop(request.model, None)
            self.unmeasured.discard((worker.worker_id, request.model))
            driver = self.process_bytes(worker.worker_id, device) if device else 0
            models = self.models_bytes(worker.worker_id, device) if device else 0
            call.future.set_result((OnHost(1.0, driver, models), b""))
            return
        super().answer(call)

    def drop(self, worker: FakeWorker, model: str) -> None:
        self.on_device.get(worker.worker_id, {}).pop(model, None)
        self.unmeasured.discard((worker.worker_id, model))
        super().drop(worker, model)

    def called(self, call: Call) -> None:
        """A model's first call after its move is measured as it arrives: the worker may run
        it before moves sent earlier, and its reply may come after theirs."""
        request, worker_id = call.request, call.worker.worker_id
        if isinstance(request, Infer) and (worker_id, request.model) in self.unmeasured:
            self.unmeasured.discard((worker_id, request.model))
            device = self.on_device[worker_id][request.model]
            measured = self.process_bytes(worker_id, device), self.models_bytes(worker_id, device)
            self.measures[call.future] = measured

    def answered(self, call: Call, request: Infer) -> Answered:
        answered = super().answered(call, request)
        process, models = self.measures.pop(call.future, (0, 0))
        return Answered(
            answered.answers, answered.infer_ms, device_process=process, device_models=models
        )

    def kill(self, worker: FakeWorker, respawn: bool = True) -> None:
        self.on_device.pop(worker.worker_id, None)
        self.unmeasured = {(w, m) for w, m in self.unmeasured if w != worker.worker_id}
        self.contexts = {(w, d) for w, d in self.contexts if w != worker.worker_id}
        super().kill(worker, respawn)

    def device_bytes(self, device: str) -> int:
        """What the workers really hold on `device`: their models and contexts."""
        models = sum(list(p.values()).count(device) for p in self.on_device.values())
        contexts = sum(1 for _, d in self.contexts if d == device)
        return models * WEIGHTS_BYTES + contexts * CONTEXT_BYTES

    def process_bytes(self, worker_id: int, device: str) -> int:
        """The driver's count for one worker on `device`, which each move reports."""
        made = (worker_id, device) in self.contexts
        return self.models_bytes(worker_id, device) + made * CONTEXT_BYTES

    def models_bytes(self, worker_id: int, device: str) -> int:
        return list(self.on_device.get(worker_id, {}).values()).count(device) * WEIGHTS_BYTES


class DeviceInterleavings(Interleavings):
    device_count = 2
    budget_bytes = DEVICE_BUDGET_BYTES

    def __init__(self) -> None:
        self.devices = [
            DeviceMemory(f"cuda:{i}", self.budget_bytes, 32 * MiB, CONTEXT_BYTES)
            for i in range(self.device_count)
        ]
        self.device = self.devices[0]
        super().__init__()

    def make_pool(self, size: int) -> FakePool:
        return DevicePool(size, self.footprint)

    def make_devices(self) -> DeviceTier:
        return DeviceTier(self.devices, LRUPolicy(), self.clock)

    @checked
    def the_device_tier_never_charges_past_its_budget(self) -> None:
        assert all(device.held_bytes <= device.budget_bytes for device in self.devices)

    @checked
    def what_is_on_each_device_never_passes_its_budget(self) -> None:
        pool = self.pool
        assert isinstance(pool, DevicePool)
        for device in self.devices:
            held = pool.device_bytes(device.name)
            assert held <= device.budget_bytes, (pool.on_device, pool.contexts)

    @checked
    def no_device_holds_two_copies_of_a_model(self) -> None:
        pool = self.pool
        assert isinstance(pool, DevicePool)
        places = [(m, d) for placed in pool.on_device.values() for m, d in placed.items()]
        assert len(places) == len(set(places)), pool.on_device


DeviceInterleavings.TestCase.settings = runs_of_30_steps(200)
TestHostWithDevicesUnderAnyInterleaving = DeviceInterleavings.TestCase


class OneDevice(DeviceInterleavings):
    device_count = 1


class OneWorkerThreeModelsLessAContext(OneDevice):
    """One worker's moves and measures interleave; a third model fits only if its context
    were not charged."""

    budget_bytes = 3 * WEIGHTS_BYTES

    def make_pool(self, size: int) -> FakePool:
        return super().make_pool(1)


OneWorkerThreeModelsLessAContext.TestCase.settings = runs_of_30_steps(100)
TestATightDeviceUnderAnyInterleaving = OneWorkerThreeModelsLessAContext.TestCase


def test_a_third_model_sends_the_least_recent_to_sleep_and_it_wakes() -> None:
    machine = OneDevice()
    try:
        for name in ("a", "b", "c"):  # each: loaded, moved, its batch answered
            machine.run_steps([("request", {"name": name})])
            for _ in range(3):
                machine.run_steps([("answer_a_call", {"index": 0})])
        machine.run_steps([("request", {"name": "a"})])
        for _ in range(3):
            if machine.pool.calls:
                machine.run_steps([("answer_a_call", {"index": 0})])
        assert machine.device.wakes == 1 and machine.device.evictions >= 1
    finally:
        machine.teardown()


def test_replayed_steps_hold_with_a_device() -> None:
    replay([("request", {"name": "a"}), ("answer_a_call", {"index": 0})], OneDevice)


def test_a_request_whose_model_goes_while_it_waits_for_the_device_is_told_to_retry() -> None:
    """The request waits for its model's move; meanwhile the model's worker dies and no other
    takes it: the request gets an error that says so, not a KeyError."""
    replay(
        [
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 0}),
            arrives("request", "a", call=0),
            arrives("request", "c", call=0),
            ("a_call_fails", {"index": 0}),
            arrives("request", "a", call=0),
            ("kill_a_worker", {"worker": 0, "respawn": False}),
            ("a_worker_joins", {}),
            ("idle_unload", {}),
        ],
        DeviceInterleavings,
    )


def test_a_move_the_worker_refuses_leaves_the_model_on_the_cpu_and_the_request_answered() -> None:
    machine = OneDevice()
    try:
        machine.run_steps([("request", {"name": "a"}), ("answer_a_call", {"index": 0})])
        [move] = [c for c in machine.pool.calls if isinstance(c.request, ToDevice)]
        machine.fail(move)  # the handler raised while moving
        machine.settle()
        machine.run_steps([("answer_a_call", {"index": 0})])  # its batch, on the CPU
        request = machine.requests[-1]
        assert request.done() and request.exception() is None
        assert "a" not in machine.host.devices.capable and machine.device.held_bytes == 0
    finally:
        machine.teardown()


def test_a_driver_count_that_a_move_overtook_does_not_shrink_the_context() -> None:
    """a's first call on the device is measured before b's move, and answered after it: its
    driver's count lacks b. Taken as the ledger's, it left the worker's context uncharged, and c
    moved in with no room for it (the GPU check's dry run, as CI loaded its cores). Each
    count now comes with what the worker's models there were charged as it was taken."""
    replay(
        [
            ("request", {"name": "a"}),
            ("answer_a_call", {"index": 0}),  # a's load
            ("answer_a_call", {"index": 0}),  # a's move; its batch goes
            ("request", {"name": "b"}),
            ("answer_a_call", {"index": 1}),  # b's load
            ("answer_a_call", {"index": 1}),  # b's move; its batch goes
            ("answer_a_call", {"index": 0}),  # a's batch, measured before b's move
            ("request", {"name": "c"}),
            ("answer_a_call", {"index": 1}),  # c's load
            ("answer_a_call", {"index": 1}),  # c's move, or a's to sleep to make room
        ],
        OneWorkerThreeModelsLessAContext,
    )


class DeviceBatches(OneDevice):
    scheduling = SchedulerSettings(
        response_timeout_s=1e9, scale_in_idle_s=5.0, max_batch_size=32, device_batch_size=4
    )


def test_a_model_that_can_use_a_device_batches_by_the_device_batch_size() -> None:
    machine = DeviceBatches()
    try:
        machine.run_steps([("request", {"name": "a"}), ("answer_a_call", {"index": 0})])
        machine.settle()
        assert machine.host.copies.dispatchers["a"].queue.max_batch_size == 4
    finally:
        machine.teardown()


def test_a_model_that_cannot_use_a_device_batches_by_the_batch_size() -> None:
    assert SchedulerSettings(max_batch_size=32, device_batch_size=4).batch_size(None, True) == 32


def test_a_copy_scaled_in_while_it_moves_to_a_device_leaves_after_the_move() -> None:
    """b's copy on worker 2 is still moving to a device when c's load takes its room: the
    unload waits for the move, as the worker would take them in that order."""
    replay(
        [
            ("put_min_worker", {"copies": 2, "name": "b"}),
            arrives("request", "a", call=0, turns=1),
            arrives("request", "b", call=0),  # both of b's copies start their moves
            arrives("request", "c", call=50),
            ("a_call_fails", {"index": 0}),
            arrives("request", "a", call=1),
        ],
        DeviceInterleavings,
    )


def test_a_first_copy_whose_move_is_under_way_is_awaited_not_reserved_again() -> None:
    """b's first copy dies while both move; its second becomes the first, mid-move: b's
    request waits for that move instead of a reservation the copy already holds."""
    replay(
        [
            ("put_min_worker", {"copies": 2, "name": "b"}),
            arrives("request", "a", call=0, turns=1),
            arrives("request", "b", call=0),
            ("kill_a_worker", {"respawn": False, "worker": 0}),
        ],
        DeviceInterleavings,
    )


def test_a_driver_count_taken_before_an_unload_does_not_grow_the_context() -> None:
    """b's copy leaves worker 1 while a's first call, measured with b still on the device, is
    under way: that count is b's bytes higher than the ledger's records, and charged to the
    context it left no room for b's load on a new worker (found by the one-worker machine)."""
    replay(
        [
            ("request", {"name": "a"}),
            arrives("request", "b", call=0, fails=True),
            ("put_min_worker", {"copies": 0, "limit": 0, "name": "b"}),
            ("request", {"name": "b"}),
            arrives("request", "a", call=0),
        ],
        OneWorkerThreeModelsLessAContext,
    )


def test_a_first_copy_whose_device_place_another_copy_holds_runs_on_the_cpu() -> None:
    """After a worker's death and a failed load, a's copies are on workers 2 and 3, and the
    device's one place for a is worker 3's: the first copy, worker 2's, can have none while it
    holds it, so the request is answered on the CPU, not held until the deadline."""
    replay(
        [
            ("request", {"name": "a"}),
            ("request", {"name": "a"}),
            ("a_worker_joins", {}),
            ("kill_a_worker", {"respawn": False, "worker": 0}),
            ("a_worker_joins", {}),
            arrives("put", "a", call=0, fails=True),
            ("answer_a_call", {"index": 0}),
            ("answer_a_call", {"index": 0}),
            ("request", {"name": "a"}),
        ],
        OneDevice,
    )


def test_an_unloaded_model_keeps_its_device_room_until_its_worker_lets_it_go() -> None:
    """A DELETE of a model on the device, its Unload not yet run by the worker: another model
    moving in meanwhile would pass the budget (Hypothesis found it; one worker, room for
    three models less a context)."""
    steps: list[tuple[str, dict[str, object]]] = [("request", {"name": "c"})]
    steps += [("answer_a_call", {"index": 0})] * 3
    steps += [("request", {"name": "a"})]
    steps += [("answer_a_call", {"index": 0})] * 3
    steps += [("delete", {"name": "a"}), ("request", {"name": "b"})]
    steps += [("answer_a_call", {"index": 1})] * 2
    replay(steps, OneWorkerThreeModelsLessAContext)


def a_stranded_for_c() -> list[Step]:
    """a and b on the device, c needs a's room; the worker fails a's move out (its weights may
    still be there), and c's request runs on the CPU."""
    steps: list[Step] = []
    for name in ("a", "b"):  # each: loaded, moved, its batch answered
        steps += [("request", {"name": name})] + [("answer_a_call", {"index": 0})] * 3
    steps += [("request", {"name": "c"}), ("answer_a_call", {"index": 0})]  # c's load: a's ToHost
    return steps + [("a_call_fails", {"index": 0}), ("answer_a_call", {"index": 0})]


def test_a_victim_whose_move_to_host_memory_fails_keeps_its_room() -> None:
    """c must not move in past the budget (Hypothesis found it)."""
    replay(a_stranded_for_c(), OneWorkerThreeModelsLessAContext)


def test_a_move_that_only_stranded_models_keep_out_runs_on_the_cpu_at_once() -> None:
    """c's next request sends b to sleep, and that move fails too: with a and b stranded no
    wait makes room for c, so its third request runs on the CPU rather than wait out the
    device's deadline (Hypothesis found it)."""
    steps = a_stranded_for_c() + [("request", {"name": "c"}), ("a_call_fails", {"index": 0})]
    steps += [("answer_a_call", {"index": 0}), ("request", {"name": "c"})]
    replay(steps, OneWorkerThreeModelsLessAContext)


def test_a_move_that_starts_after_its_model_left_is_told_so() -> None:
    """The move's task starts a turn after the request asked for it; by then the model's last
    copy had left: an error that says so, not a KeyError (Hypothesis found it)."""
    replay(
        [
            ("request", {"name": "b"}),
            ("put_min_worker", {"copies": 1, "limit": 0, "name": "a"}),
            ("a_call_fails", {"index": 0}),
            arrives("put", "b", call=0),
            ("delete", {"name": "a"}),
            ("a_call_fails", {"index": 1}),
            ("answer_a_call", {"index": 0}),
            ("request", {"name": "b"}),
            ("a_call_fails", {"index": 1}),
            ("request", {"name": "a"}),
            ("request", {"name": "c"}),
            ("idle_unload", {}),
            arrives("request", "b", call=0),
        ],
        DeviceInterleavings,
    )
