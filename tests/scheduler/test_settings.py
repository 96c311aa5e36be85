from modelhost.scheduler import AUTO_BATCH_SIZE, SchedulerSettings


def test_batch_size_manifest_then_server_then_handler() -> None:
    """A model's batch size comes from its manifest then the server then its handler."""
    auto, fixed = SchedulerSettings(), SchedulerSettings(max_batch_size=4)
    assert auto.batch_size(None, handler_batches=True) == AUTO_BATCH_SIZE
    assert auto.batch_size(None, handler_batches=False) == 1  # users' handlers: one at a time
    assert fixed.batch_size(None, handler_batches=False) == 4  # as MMS's batch_size
    assert fixed.batch_size(8, handler_batches=False) == 8  # the manifest wins


def test_fair_limit_is_sixteen_a_worker_thread_unless_set() -> None:
    """With tenants on and no max_concurrency, batches fill as they do with tenants off."""
    assert SchedulerSettings(slots_per_worker=2).fair_limit(workers=4) == 128
    assert SchedulerSettings(max_concurrency=5).fair_limit(workers=4) == 5
    assert SchedulerSettings().fair_limit(workers=0) == 1  # a pool still starting
