"""Composition root: workers (their template spawned by launch.py) → store → disk tier → memory
tier → host → HTTP. Each function builds one part."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import uvicorn

from modelhost.cache.admission import FrequencySketch
from modelhost.cache.devices import DeviceMemory, DeviceTier
from modelhost.cache.disk import DiskTier, UnpackLimits
from modelhost.cache.download import DownloadPolicy
from modelhost.cache.memory import FrontendAllowance, MemoryBudget, MemoryTier
from modelhost.cache.policy import policy_named
from modelhost.cache.quotas import Limits, no_limits
from modelhost.cache.stores import Stores, StoreSettings
from modelhost.config import Config
from modelhost.config.budgets import disk_budget_bytes, memory_budget_bytes
from modelhost.config.management_token import watched_management_token
from modelhost.config.tenancy import tenants_on
from modelhost.config.tenant_policies import TenantPolicies, Trust
from modelhost.config.tenants_file import untrust_refused
from modelhost.config.tenants_reload import TenantsFileWatcher
from modelhost.errors import ConfigError
from modelhost.fronts.listeners import bound_port
from modelhost.fronts.processes import Fronts, fronts_for
from modelhost.fronts.processes import running as fronts_running
from modelhost.host import ModelHost
from modelhost.host.memory_readings import PssReading, split_pss_bytes
from modelhost.host.preload import preload
from modelhost.host.serving_budgets import (
    refuse_unaffordable,
    refuse_workers_past,
    settle_budgets,
)
from modelhost.host.sizing import Sizing
from modelhost.host.upkeep import upkeep
from modelhost.http.app import build_app
from modelhost.http.beside import management_port_apart, management_servers, metrics_servers
from modelhost.http.front_routes import Routing, main_only
from modelhost.http.last_resort import Unhandled
from modelhost.http.routes import HttpSettings, SageMakerRoutes
from modelhost.http.server import (
    DrainingServer,
    SecondaryServer,
    ignore_signals_after_drain,
    refuse_unusable_tls,
    serve_beside,
    uvicorn_config,
)
from modelhost.observe.observer import Observer
from modelhost.protocols.health import Health
from modelhost.protocols.keys import keys_while_serving
from modelhost.protocols.tenants import model_tenant, tenant_rule, watched_tokens
from modelhost.protocols.torchserve import restore_registered
from modelhost.records.events import EventLog
from modelhost.scheduler import SchedulerSettings
from modelhost.units import format_bytes
from modelhost.workers.devices import named_devices
from modelhost.workers.pool import WorkerPool
from modelhost.workers.sandbox import support as sandbox_support

if TYPE_CHECKING:
    from modelhost.rpc.server import RpcServer

logger = logging.getLogger("modelhost")

# first loads grow a worker past its rehearsal; see decisions.md, "The budget keeps a learned
# headroom"
WORKER_GROWTH_SEED_BYTES = 4 * 2**20
# a pymalloc arena a worker, kept free whatever happens: readings see heap growth late
WORKER_GROWTH_FLOOR_BYTES = 2**20


async def serve_pool(config: Config, pool: WorkerPool, events: EventLog) -> int:
    """Serve until SIGTERM or SIGINT with `pool`, its template spawned (modelhost.launch)."""
    tokens = watched_tokens(config, events.emit)
    management_token = watched_management_token(config, events.emit)
    async with (
        started_host(config, pool, events) as host,
        observed(host, config) as observer,
        keys_while_serving(config.token_auth, config.token_expiration_min * 60) as keys,
        tokens.watching(),
        management_token.watching(),
    ):
        tenants = tenant_rule(config, tokens.get)
        health = Health(host, "" if config.multi_model else config.single_model)
        routes = SageMakerRoutes(
            host,
            HttpSettings(
                config.max_request_bytes,
                config.single_model,
                config.instance_id,
                management_token=management_token.get,
                max_response_bytes=config.max_response_bytes,
                sagemaker_contract=config.sagemaker_contract,
                tenants=tenants,
                keys=keys,
                model_api=config.model_api,
                default_accept=config.default_accept,
            ),
            observer.usage,
            health,
        )
        rpc = grpc_servers(
            host,
            config,
            observer,
            health,
            keys=keys,
            tenants=tenants,
            run_folder=pool.run_dir,
            management_token=management_token.get,
        )
        tls = bool(config.ssl_certfile)
        needs_main = main_only(config)
        fronts = fronts_for(
            config.fronts, config.host, config.port, pool.run_dir, tls, main_only=needs_main
        )
        server = DrainingServer(
            lambda: drain(observer, rpc, fronts),
            uvicorn_config(
                build_app(routes, observer, token_api=not management_port_apart(config)),
                config,
                config.port,
                relayed=fronts is not None,
                timeout_graceful_shutdown=int(config.drain_timeout_s),
            ),
        )
        if fronts is not None:
            fronts.routing = Routing(host, observer, config, pool.run_dir, keys, tokens=tokens.get)
            fronts.drain_timeout_s = config.drain_timeout_s
            fronts.on_none_left = server.stop_failed
        refuse_unusable_tls(config)
        beside = management_servers(routes, config, Unhandled(observer.metrics.unhandled_errors))
        beside += metrics_servers(observer, config)
        await preload(host, starting_models(config), config.load_models)
        if config.restore_registered:
            await restore_registered(host, Path(config.cache_dir), config.model_snapshot)
        ignore_signals_after_drain()
        health.serve(host.pool.health)
        if config.refuse_pickle:
            logger.info("--refuse-pickle: %s", sandbox_support().describe())
        elif config.untrusted_workers:
            untrusted = f"--untrusted-workers {config.untrusted_workers}"
            logger.info("%s: %s", untrusted, sandbox_support().describe())
        async with fronts_running(fronts, config.host, config.port) as sockets:
            scheme = "https" if tls else "http"
            port = fronts.port if fronts is not None else bound_port(sockets)  # 0: kernel's
            where = f"{scheme}://{config.host}:{port}"
            logger.info("serving %s on %s", host.store_uri, where)
            serving = functools.partial(settle_budgets, host, events)
            await serve_rpc_beside(server, beside, rpc, sockets, serving)
    return 1 if server.failed else 0


async def serve_rpc_beside(
    server: uvicorn.Server,
    beside: list[SecondaryServer],
    rpc: list[RpcServer],
    sockets: list[socket.socket] | None = None,
    serving: Callable[[], None] = lambda: None,
) -> None:
    """The HTTP servers, the gRPC ones started first (then `serving`) beside them."""
    try:
        for each in rpc:
            await each.start()
            await each.serving()
            logger.info("serving gRPC on %s (%s)", each.address, each.front)
        serving()
        await serve_beside(server, beside, sockets)
    finally:
        await asyncio.gather(*(each.stop() for each in rpc))


def grpc_servers(
    host: ModelHost, config: Config, observer: Observer, health: Health, **more: Any
) -> list[RpcServer]:
    """The gRPC servers, if a gRPC port is set: only then is grpcio imported; `more`: keys,
    tenants and the rest, as rpc_servers takes them."""
    if not (config.grpc_port or config.grpc_management_port):
        return []
    from modelhost.rpc.services import rpc_servers

    return rpc_servers(host, config, observer, health, **more)


def drain(observer: Observer, rpc: list[RpcServer], fronts: Fronts | None = None) -> None:
    """SIGTERM: end the event streams, and stop the gRPC servers and the fronts taking calls."""
    observer.drain()
    for each in rpc:
        each.drain()
    if fronts is not None:
        fronts.drain()


@contextlib.asynccontextmanager
async def observed(host: ModelHost, config: Config) -> AsyncIterator[Observer]:
    """Metrics, event stream and access log for `host` while the server runs."""
    observer = Observer(
        host,
        config.access_log,
        config.metrics_model_series,
        config.max_event_streams,
        tenants=tenants_on(config.tenant_from),
        torchserve_hostname=socket.gethostname() if config.torchserve_metrics else "",
    )
    try:
        observer.start()
    except OSError as error:
        raise ConfigError(
            f"cannot open the access log {config.access_log}: {error}; set --access-log to a "
            "writable file, - for stdout, or empty for none"
        ) from None
    try:
        yield observer
    finally:
        observer.stop()


@contextlib.asynccontextmanager
async def started_host(
    config: Config, pool: WorkerPool, events: EventLog
) -> AsyncIterator[ModelHost]:
    stores = Stores(  # before the baseline: an S3 client costs the frontend memory
        config.model_store,
        config.allowed_urls,
        StoreSettings(config.store_timeout_s, config.max_concurrent_downloads),
    )
    if not config.sagemaker_contract:  # else SageMaker fills the store as it loads
        stores.refuse_missing_folder()
    tenants = TenantsFileWatcher(config.tenants_file, events.emit)
    try:
        budget_bytes = memory_budget_bytes(config)
        await pool.startup(
            functools.partial(refuse_workers_past, budget_bytes, config.frontend_allowance_bytes)
        )
        # settled: each worker says hello after its rehearsal (test_app_memory.py)
        idle = split_pss_bytes(pool.pids())
        host = build_host(
            config, pool, stores, events, idle, tenants=tenants, budget_bytes=budget_bytes
        )
    except BaseException:
        await stores.close()
        raise
    try:
        async with upkeep(host, config.idle_unload_s), tenants.watching():
            yield host
    finally:
        host.close()
        await stores.close()


def build_host(
    config: Config,
    pool: WorkerPool,
    stores: Stores,
    events: EventLog,
    idle: PssReading,
    tenants: TenantsFileWatcher,
    budget_bytes: int,
) -> ModelHost:
    """`tenants`: the tenants file's policies, read at each decision so that a reload applies."""
    policies = tenants.get
    memory = memory_tier(config, pool, idle, budget_bytes, policies)
    cache_dir = Path(config.cache_dir)
    disk_budget = disk_budget_bytes(config, cache_dir)
    tenants.open_within(memory.budget.budget_bytes, disk_budget, untrust_refused(config))
    trust = Trust(config.refuse_pickle, model_tenant(config), policies)
    disk = DiskTier(
        cache_dir,
        disk_budget,
        stores=stores,
        events=events,
        limits=UnpackLimits(config.unpacked_limit_bytes, config.max_unpacked_files),
        policy=DownloadPolicy(config.store_attempts, config.store_timeout_s),
        revalidate_interval_s=config.revalidate_interval_s,
        why_untrusted=trust.why_untrusted,
        tenant_limits=tenant_limits(policies),
    )
    disk.rebuild()
    host = ModelHost(
        pool,
        memory,
        disk,
        events,
        pinned=frozenset(config.pinned_models),
        deadline_s=config.default_response_timeout_s,
        scheduling=SchedulerSettings(
            job_queue_size=config.job_queue_size,
            max_batch_size=config.batch_size,
            device_batch_size=config.device_batch_size,
            max_batch_delay_ms=config.max_batch_delay_ms,
            max_workers_per_model=config.max_workers_per_model,
            min_workers_per_model=config.workers_per_model or len(pool.workers),
            max_concurrency=config.max_concurrency,
            response_timeout_s=config.default_response_timeout_s,
            scale_in_idle_s=config.scale_in_idle_s,
            slots_per_worker=pool.threads,
            fair_tenants=tenants_on(config.tenant_from),
            tenant_policies=tenants.get if config.tenants_file else None,
            bodies_room_bytes=config.frontend_allowance_bytes,
        ),
        max_rows_per_request=config.max_rows_per_request,
        sagemaker_contract=config.sagemaker_contract,
        sizing=functools.partial(
            Sizing, max_names=config.sizing_names, thrash_window_s=config.thrash_window_s
        ),
        model_tenant=model_tenant(config),
        why_untrusted=trust.why_untrusted,
        devices=device_tier(config, pool),
        views=pool.views,
    )
    host.connect()  # the pool started first, for the baseline
    return host


def memory_tier(
    config: Config,
    pool: WorkerPool,
    idle: PssReading,
    budget_bytes: int,
    policies: Callable[[], TenantPolicies] = TenantPolicies,
) -> MemoryTier:
    """The memory budget less the idle server and its frontend's allowance."""
    budget = MemoryBudget(
        budget_bytes,
        idle.total_bytes,
        drift_seed_bytes=len(pool.workers) * WORKER_GROWTH_SEED_BYTES,
        headroom_floor_bytes=len(pool.workers) * WORKER_GROWTH_FLOOR_BYTES,
        frontend=FrontendAllowance(idle.frontend_bytes, config.frontend_allowance_bytes),
    )
    refuse_unaffordable(budget, len(pool.workers))
    return MemoryTier(
        budget,
        policy_named(config.eviction_policy),
        admission=FrequencySketch() if config.admission == "tinylfu" else None,
        # under SageMaker's contract a load evicts nothing: the platform unloads on a 507
        min_residency_s=math.inf if config.sagemaker_contract else config.min_residency_s,
        limits=tenant_limits(policies) if config.tenants_file else no_limits,  # none: no file
    )


def device_tier(config: Config, pool: WorkerPool) -> DeviceTier:
    """The devices the workers said they can use, each with its budget."""
    seen = next((w.devices for w in pool.workers.values() if w.devices), ())
    missing = set(named_devices(config.devices)) - {info.name for info in seen}
    if missing and not config.fake_devices:
        raise ConfigError(
            f"--devices names {', '.join(sorted(missing))}, which the workers cannot use (torch "
            f"sees {len(seen)} CUDA devices here); name only those, or use --devices auto or none"
        )
    devices = [
        DeviceMemory(
            info.name,
            config.device_budget_bytes.of(info.total_bytes),
            info.total_bytes,
            info.context_bytes,
        )
        for info in seen
    ]
    for device in devices:
        logger.info(
            "device %s: %s of %s for models and the workers' contexts (--device-budget)",
            device.name,
            format_bytes(device.budget_bytes),
            format_bytes(device.total_bytes),
        )
    policy = policy_named(config.eviction_policy)
    return DeviceTier(devices, policy, copies_per_device=config.workers_per_device)


def starting_models(config: Config) -> tuple[str, ...]:
    """The pinned models, and a single-model server's model: /ping waits for it."""
    models = tuple(config.pinned_models)
    if not config.multi_model and config.single_model not in models:
        models += (config.single_model,)
    return models


def tenant_limits(policies: Callable[[], TenantPolicies]) -> Limits:
    """Each tenant's limits from the tenants file as it is now."""
    return lambda tenant: policies().of(tenant)
