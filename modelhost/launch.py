"""`modelhost serve` in the order that starts soonest: the worker template is spawned before the
frontend imports its HTTP side, so the two processes import at once (app.py builds the rest)."""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

from modelhost.cache.disk_index import INDEX_FILE
from modelhost.cache.disk_runtimes import cached_runtimes
from modelhost.cache.store_runtimes import store_runtimes
from modelhost.config import Config, flag_name, listeners
from modelhost.config.budgets import memory_budget_bytes
from modelhost.errors import ConfigError
from modelhost.fronts.listeners import refuse_taken_ports
from modelhost.records.events import EventLog
from modelhost.records.memory import return_heap_promptly
from modelhost.resources import most_open_files, usable_cores
from modelhost.run_dirs import run_dir
from modelhost.workers.answers import answer_environment
from modelhost.workers.devices import devices_environment
from modelhost.workers.direct import direct_environment
from modelhost.workers.environment import worker_environment
from modelhost.workers.kept_memory import kept_environment
from modelhost.workers.pool import WorkerPool
from modelhost.workers.pool.calls import stuck_after_s
from modelhost.workers.views import Views

logger = logging.getLogger("modelhost")


def serve(config: Config) -> int:
    """Run the server until SIGTERM or SIGINT; the process exit code."""
    setup_logging(config.log_level)
    return_heap_promptly()  # large bodies' heap, else charged to the models' room
    most_open_files()  # before the worker template, which its workers inherit
    for notice in config.notices:
        logger.warning(notice)
    try:
        return run_loop(main(config))
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def run_loop(coroutine: Coroutine[Any, Any, int]) -> int:
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


async def main(config: Config) -> int:
    refuse_taken_ports((host, port, flag_name(name)) for name, host, port in listeners(config))
    with run_dir() as folder:
        events = EventLog()
        pool = worker_pool(config, folder, events)
        await pool.start_template()
        try:
            from modelhost.app import serve_pool  # imported while the template imports

            return await serve_pool(config, pool, events)
        finally:
            await pool.shutdown()  # however it stopped: a refused store or budget included


def worker_pool(config: Config, folder: Path, events: EventLog) -> WorkerPool:
    workers = config.workers or usable_cores()
    for notice in pool_notices(config, workers):
        logger.warning(notice)
    untrusted = workers if config.refuse_pickle else config.untrusted_workers
    if untrusted and untrusted >= workers and not config.refuse_pickle:
        raise ConfigError(
            f"--untrusted-workers {untrusted} leaves none of the {workers} workers for trusted "
            "models: set it below --workers (unset, one a usable core)"
        )
    environment = worker_environment(os.environ)
    environment |= devices_environment(config.devices, config.fake_devices)
    environment |= direct_environment(config.fronts)
    environment |= answer_environment(config.max_response_bytes)
    environment |= kept_environment(config.worker_max_growth_bytes.of(memory_budget_bytes(config)))
    views = Views(Path(config.cache_dir)) if untrusted else None  # what sandboxed workers read
    if views is not None:
        environment |= views.environment()
    runtimes = preloaded_runtimes(config)
    logger.info("the worker template preloads %s", ",".join(runtimes) or "no runtime")
    return WorkerPool(
        workers,
        config.threads_per_worker or max(1, usable_cores() // workers),
        folder,
        events,
        runtimes,
        load_timeout_s=config.worker_load_timeout_s,
        infer_timeout_s=stuck_after_s(config.default_response_timeout_s),
        environment=environment,
        untrusted_size=untrusted,
        views=views,
        max_response_bytes=config.max_response_bytes,
        max_scratch_bytes=config.worker_max_scratch_bytes,
    )


def pool_notices(config: Config, workers: int) -> list[str]:
    """Counts past what the pool gives: workers a model, threads a runtime."""
    asked = {
        "workers_per_model": config.workers_per_model,
        "max_workers_per_model": config.max_workers_per_model,
    }
    notices = [
        f"{setting} {count} is above the {workers} workers: a model runs on at most {workers}; "
        f"lower it or raise --workers"
        for setting, count in asked.items()
        if count > workers
    ]
    if (threads := config.threads_per_worker) > (cores := usable_cores()):
        notices.append(
            f"threads_per_worker {threads} is above the {cores} usable cores: each worker runs "
            f"up to {threads} batches at once, its runtimes on {cores} threads"
        )
    return notices


def preloaded_runtimes(config: Config) -> tuple[str, ...]:
    """The runtimes the cache's models needed last, with those `--preload-runtimes` names.

    The default list is a guess, replaced by what the cache or the store's file names tell, so
    a template for TorchServe archives alone does not import scikit-learn.
    """
    cached = cached_runtimes(Path(config.cache_dir) / INDEX_FILE)
    if config.preload_runtimes_given:
        return tuple(dict.fromkeys((*config.preload_runtimes, *cached)))
    return cached or store_runtimes(config.model_store) or config.preload_runtimes


def setup_logging(level: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    events = logging.StreamHandler(sys.stdout)
    events.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("modelhost")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    event_logger = logging.getLogger("modelhost.events")
    event_logger.handlers[:] = [events]
    event_logger.propagate = False
    event_logger.setLevel(logging.INFO)
