"""The device tier's rules: budgets per device, contexts charged once, victims sent to sleep."""

from __future__ import annotations

from modelhost.cache.devices import DeviceMemory, DeviceTier, OnDevice, Placement
from modelhost.cache.policy import LRUPolicy

MiB = 2**20


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def tier(*budgets_mib: int, context_mib: int = 1, copies_per_device: int = 1) -> DeviceTier:
    devices = [
        DeviceMemory(f"cuda:{i}", b * MiB, 2 * b * MiB, context_mib * MiB)
        for i, b in enumerate(budgets_mib)
    ]
    return DeviceTier(devices, LRUPolicy(), Clock(), copies_per_device)


def idle(name: str) -> bool:
    return True


def place(
    t: DeviceTier, name: str, size_mib: int, worker: int = 1, pinned: str | None = None
) -> OnDevice:
    """Reserve, send the victims to sleep, and move in as measured at the reservation."""
    got = t.reserve(name, size_mib * MiB, worker, pinned, idle)
    assert got is not None
    record, victims = got
    for victim in victims:
        t.slept(victim)
    t.victims_gone(record, size_mib * MiB)
    t.moved_in(record, size_mib * MiB, 0, 1.0)
    return record


def test_a_workers_context_is_charged_once_per_device() -> None:
    t = tier(100)
    place(t, "a", 10)
    place(t, "b", 10)
    device = t.devices["cuda:0"]
    assert device.held_bytes == 21 * MiB
    place(t, "c", 10, worker=2)
    assert device.held_bytes == 32 * MiB


def test_a_measured_context_replaces_the_estimate() -> None:
    t = tier(100)
    got = t.reserve("a", 10 * MiB, 1, None, idle)
    assert got is not None
    t.moved_in(got[0], 10 * MiB, 3 * MiB, 1.0)
    assert t.devices["cuda:0"].held_bytes == 13 * MiB
    assert t.devices["cuda:0"].context_estimate_bytes == 3 * MiB


def test_a_move_goes_to_the_device_with_the_most_room() -> None:
    t = tier(50, 50)
    assert place(t, "a", 30).device == "cuda:0"
    assert place(t, "b", 30).device == "cuda:1"


def test_a_full_device_sends_its_least_recently_used_idle_model_to_sleep() -> None:
    t = tier(30)
    place(t, "a", 12)
    place(t, "b", 12)
    t.used(t.placed["a", 1])
    got = t.reserve("c", 12 * MiB, 1, None, idle)
    assert got is not None
    assert [v.name for v in got[1]] == ["b"]
    assert t.placed["b", 1].state is Placement.LEAVING


def test_until_its_victims_leave_the_newcomer_holds_their_bytes() -> None:
    t = tier(30)
    place(t, "a", 12)
    place(t, "b", 12)
    got = t.reserve("c", 8 * MiB, 1, None, idle)
    assert got is not None
    record, victims = got
    device = t.devices["cuda:0"]
    assert [v.name for v in victims] == ["a"]
    assert device.held_bytes <= device.budget_bytes
    assert record.bytes == 12 * MiB  # the victim's, so nobody else takes that room yet
    for victim in victims:
        t.slept(victim)
    t.victims_gone(record, 8 * MiB)
    assert device.held_bytes == (1 + 12 + 8) * MiB


def test_a_busy_model_is_never_a_victim_and_the_reservation_waits() -> None:
    t = tier(30)
    place(t, "a", 14)
    place(t, "b", 14)
    assert t.reserve("c", 14 * MiB, 1, None, lambda name: False) is None


def test_a_model_larger_than_the_budget_never_fits() -> None:
    t = tier(30)
    device = t.devices["cuda:0"]
    assert not t.fits_ever(30 * MiB, device, 1)  # the context takes a MiB
    assert t.fits_ever(29 * MiB, device, 1)
    assert t.reserve("big", 30 * MiB, 1, None, idle) is None


def test_a_pinned_model_goes_to_its_device_or_nowhere() -> None:
    t = tier(50, 50)
    assert place(t, "a", 10, pinned="cuda:1").device == "cuda:1"
    assert t.reserve("b", 10 * MiB, 1, "cuda:7", idle) is None


def test_sleeping_counts_an_eviction_and_the_model_is_asleep() -> None:
    t = tier(30)
    place(t, "a", 14)
    place(t, "b", 14)
    place(t, "c", 14)
    assert t.asleep == {("a", 1)}
    assert t.devices["cuda:0"].evictions == 1


def test_an_unload_frees_the_device_and_forgets_the_sleeper() -> None:
    t = tier(30)
    place(t, "a", 14)
    t.unloaded("a")
    assert t.devices["cuda:0"].held_bytes == 1 * MiB  # the context stays while its worker lives
    t.worker_lost(1)
    assert t.devices["cuda:0"].held_bytes == 0


def test_a_lost_worker_takes_its_models_and_context_off_every_device() -> None:
    t = tier(50, 50)
    place(t, "a", 30, worker=1)
    place(t, "b", 30, worker=2)
    t.worker_lost(1)
    assert ("a", 1) not in t.placed and ("b", 2) in t.placed
    assert sum(d.held_bytes for d in t) == 31 * MiB


def test_a_measure_past_the_budget_is_relieved_by_idle_models() -> None:
    t = tier(30)
    place(t, "a", 10)
    got = t.reserve("b", 10 * MiB, 1, None, idle)
    assert got is not None
    t.moved_in(got[0], 25 * MiB, 0, 1.0)  # the estimate was low
    victims = t.overflow("cuda:0", idle)
    assert [v.name for v in victims] == ["a"]


def test_the_measured_size_is_the_next_estimate() -> None:
    t = tier(100)
    got = t.reserve("a", 40 * MiB, 1, None, idle)
    assert got is not None
    t.moved_in(got[0], 12 * MiB, 0, 1.0)
    t.slept(got[0])
    assert t.estimate("a", 40 * MiB) == 12 * MiB
    assert t.estimate("other", 40 * MiB) == 40 * MiB


def test_room_a_victim_still_holds_goes_to_no_other_reservation() -> None:
    t = tier(40, context_mib=2)
    place(t, "a", 14)
    place(t, "b", 14)
    got = t.reserve("c", 12 * MiB, 1, None, idle)
    assert got is not None and [v.name for v in got[1]] == ["a"]
    # "a" is still on the device: a newcomer without victims must not count on its room
    later = t.reserve("d", 12 * MiB, 1, None, lambda name: name != "b")
    assert later is None


def test_a_newcomer_dropped_before_its_victims_leave_gives_their_room_back_to_them() -> None:
    t = tier(40, context_mib=2)
    place(t, "a", 18)
    place(t, "b", 18)
    got = t.reserve("c", 18 * MiB, 1, None, idle)
    assert got is not None and [v.name for v in got[1]] == ["a"]
    t.unloaded("c")  # unloaded from host memory while "a" is still leaving
    assert t.devices["cuda:0"].held_bytes == (2 + 18 + 18) * MiB
    assert t.reserve("d", 18 * MiB, 1, None, lambda name: False) is None


def test_a_first_calls_growth_is_charged_and_is_the_next_estimate() -> None:
    t = tier(100)
    record = place(t, "a", 10)
    t.grown(record, 3 * MiB)
    assert t.devices["cuda:0"].held_bytes == (1 + 13) * MiB
    t.slept(record)
    assert t.estimate("a", 10 * MiB) == 13 * MiB


def test_the_drivers_count_recharges_the_workers_context_past_its_models_there() -> None:
    t = tier(100)
    place(t, "a", 10)
    place(t, "other", 10, worker=2)
    assert t.reserve("b", 20 * MiB, 1, None, idle) is not None  # arriving: not there yet
    t.counted("cuda:0", 1, 17 * MiB, 10 * MiB)  # the kernels a first call loaded, say
    device = t.devices["cuda:0"]
    assert (device.contexts[1], device.contexts[2]) == (7 * MiB, MiB)
    assert device.held_bytes == (7 + 10 + 20 + 1 + 10) * MiB


def test_the_context_is_the_count_past_what_the_worker_charged_its_models_then() -> None:
    """A count taken while a model that has since left the ledger was still there: the worker
    says what its models were charged as it counted, so the context is not grown by it."""
    t = tier(100)
    place(t, "a", 10)
    t.counted("cuda:0", 1, 21 * MiB, 20 * MiB)  # a and b, which the ledger has dropped
    assert t.devices["cuda:0"].contexts[1] == MiB


def test_a_context_the_driver_counted_is_the_next_workers_estimate() -> None:
    t = tier(30)
    place(t, "a", 10)
    t.counted("cuda:0", 1, 16 * MiB, 10 * MiB)
    got = t.reserve("b", 10 * MiB, 2, None, idle)
    assert got is not None and [victim.name for victim in got[1]] == ["a"]


def test_a_context_counted_past_the_budget_sends_idle_models_to_sleep() -> None:
    t = tier(30)
    place(t, "a", 10)
    place(t, "b", 10)
    t.counted("cuda:0", 1, 35 * MiB, 20 * MiB)
    assert [victim.name for victim in t.overflow("cuda:0", idle)] == ["a"]


def test_a_model_still_leaving_gets_no_second_record_until_it_has_left() -> None:
    t = tier(30)
    place(t, "a", 14)
    place(t, "b", 14)
    got = t.reserve("c", 14 * MiB, 1, None, idle)
    assert got is not None and [v.name for v in got[1]] == ["a"]
    assert t.reserve("a", 14 * MiB, 1, None, idle) is None  # "a" is moving to host memory
    t.slept(got[1][0])
    assert ("a", 1) in t.asleep


def test_a_copy_goes_to_the_device_its_model_is_not_on_the_least_used() -> None:
    t = tier(100, 100, 100)
    first = place(t, "a", 10, worker=1)
    place(t, "b", 30, worker=1, pinned="cuda:1")
    copy = place(t, "a", 10, worker=2)
    assert (first.device, copy.device) == ("cuda:0", "cuda:2")
    assert t.of("a", 1) is first and t.of("a", 2) is copy
    assert t.devices["cuda:2"].held_bytes == 11 * MiB


def test_a_copy_no_device_can_take_gets_none_and_its_model_keeps_its_place() -> None:
    t = tier(100)
    first = place(t, "a", 10, worker=1)
    assert t.reserve("a", 10 * MiB, 2, None, idle) is None  # one copy a device
    assert t.of("a", 1) is first
    t.unloaded("a")
    assert t.of("a", 1) is None and not t.devices["cuda:0"].models


def test_a_copy_leaving_drops_only_its_own_record() -> None:
    t = tier(100, 100)
    place(t, "a", 10, worker=1)
    place(t, "a", 10, worker=2)
    t.copy_unloaded("a", 2)
    assert t.of("a", 2) is None and t.of("a", 1) is not None
    assert t.devices["cuda:1"].held_bytes == 1 * MiB  # the worker's context stays, made


def test_workers_per_device_lets_a_device_hold_as_many_copies_of_a_model() -> None:
    t = tier(100, copies_per_device=2)
    first, second = place(t, "a", 10, worker=1), place(t, "a", 10, worker=2)
    assert first.device == second.device == "cuda:0"
    assert t.devices["cuda:0"].held_bytes == 22 * MiB  # each worker pays its context
    assert t.reserve("a", 10 * MiB, 3, None, idle) is None
    t.copy_unloaded("a", 1)
    assert t.of("a", 2) is second and len(t.devices["cuda:0"].models) == 1


def test_room_can_be_made_but_past_stranded_models_and_other_workers_contexts() -> None:
    t = tier(40)  # contexts of 1 MiB
    a, b = place(t, "a", 15), place(t, "b", 10, worker=2)
    device = t.devices["cuda:0"]
    assert t.room_can_be_made(38 * MiB, device, 1)  # beside its own context and worker 2's
    assert not t.room_can_be_made(39 * MiB, device, 1)
    t.strand(a)
    assert t.room_can_be_made(23 * MiB, device, 1)
    assert not t.room_can_be_made(24 * MiB, device, 1)
    t.strand(b)
    assert t.room_can_be_made(13 * MiB, device, 1)
    assert not t.room_can_be_made(14 * MiB, device, 1)
