"""The settings table: every `Config` field with its help, keys, variables and limits."""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, NamedTuple

from modelhost.units import MOST_COUNT, ByteBudget, parse_budget, parse_size

ENV_PREFIX = "MODELHOST_"
ENV_UNITS = {"SAGEMAKER_MAX_PAYLOAD_IN_MB": "MiB"}  # unitless sizes
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
EVICTION_POLICIES = ("lru", "cost-aware")  # modelhost.cache.policy.POLICIES
ADMISSIONS = ("none", "tinylfu")
# modelhost.workers.handlers.preload.PRELOAD_MODULES holds the modules of each
PRELOADABLE_RUNTIMES = ("sklearn", "xgboost", "lightgbm", "onnxruntime", "torch", "torchserve")


def _setting(
    default: Any,
    help_text: str,
    *,
    props: str | None = None,
    env: tuple[str, ...] = (),
    size: str | None = None,
    minimum: float | None = None,
    maximum: float | None = None,
    choices: tuple[str, ...] = (),
    zero_is_off: bool = False,
    secret: bool = False,
) -> Any:
    """A Config field carrying its help, properties key, extra variables and limits.

    `size` is "bytes" for a size such as 6MiB, or "percent" where 80% (of a whole) is allowed too;
    0 only where `zero_is_off`; a `secret` is shown nowhere.
    """
    if maximum is None and type(default) in (int, float):
        maximum = MOST_COUNT
    meta: dict[str, object] = {"help": help_text, "props": props, "env": env, "size": size}
    meta |= {"minimum": minimum, "maximum": maximum, "choices": choices, "zero_is_off": zero_is_off}
    return dataclasses.field(default=default, metadata=meta | {"secret": secret}, repr=not secret)


@dataclasses.dataclass(frozen=True)
class Config:
    """Every setting of a modelhost server; build it with `load_config`."""

    model_store: str = _setting(
        "./models", "the model store: a folder or a store URI", props="model_store"
    )
    host: str = _setting("127.0.0.1", "address to listen on")
    port: int = _setting(
        8080,
        "port to listen on (0: any free port)",
        env=("SAGEMAKER_BIND_TO_PORT",),
        minimum=0,
        maximum=65535,
    )
    memory_budget: str = _setting(
        "80%", "memory for loaded models: a size, or a share of usable memory", size="percent"
    )
    frontend_memory_allowance: str = _setting(
        "64MiB",
        "memory the frontend may grow by past its size at start (per-name state, buffers), "
        "kept apart from the models' room in the memory budget",
        size="bytes",
    )
    devices: str = _setting(
        "auto",
        "devices that hold models above host memory: auto (every CUDA device torch sees), "
        "none, or a list such as cuda:0,cuda:1",
    )
    device_budget: str = _setting(
        "90%",
        "memory for models on each device: a size, or a share of the device's memory",
        size="percent",
    )
    fake_devices: str = _setting(
        "",
        "for tests only: fake devices on the CPU, COUNTxSIZE[+CONTEXT[+KERNELS]] such as "
        "2x1GiB+8MiB, in place of --devices",
    )
    workers_per_device: int = _setting(
        1,
        "copies of one model a device may hold, each in its own worker paying its own context "
        "(Triton's instance count per GPU; a tune knob)",
        minimum=1,
    )
    device_batch_size: int = _setting(
        0,
        "largest batch of requests for a model that can use a device (0: as --batch-size; a "
        "tune knob)",
        minimum=0,
    )
    disk_budget: str = _setting(
        "80%",
        "disk for cached models: a size, or a share of the free space where cache_dir is",
        size="percent",
    )
    cache_dir: str = _setting("./.cache/modelhost", "folder of the disk cache of models")
    allowed_urls: tuple[str, ...] = _setting(
        (),
        "URL patterns POST /models may load from, * matching anything (empty: the model store)",
    )
    store_timeout_s: float = _setting(
        30.0, "seconds a store may stay silent before 504", minimum=0.001
    )
    store_attempts: int = _setting(
        3, "tries of a download that failed in a way a retry may mend", minimum=1
    )
    max_concurrent_downloads: int = _setting(4, "downloads running at once", minimum=1)
    revalidate_interval_s: float = _setting(
        0.0,
        "seconds after which a cached artifact's ETag is checked against the store (0: never)",
        minimum=0,
    )
    workers: int = _setting(0, "worker processes in all (0: one per usable core)", minimum=0)
    fronts: int = _setting(
        1,
        "HTTP processes taking the port's connections: above 1, front processes sharing it with "
        "SO_REUSEPORT, which answer hits straight from the workers and relay the rest to the "
        "main process (1: the main process alone)",
        minimum=1,
    )
    workers_per_model: int = _setting(
        1,
        "workers each model is loaded on (the floor; busy models scale out above it; 0: every "
        "worker, as MMS's 0)",
        props="default_workers_per_model",
        env=("SAGEMAKER_MODEL_SERVER_WORKERS",),  # per model, as sagemaker-inference-toolkit
        minimum=0,
    )
    max_workers_per_model: int = _setting(
        0, "most workers a hot model scales out to (0: every worker)", minimum=0
    )
    threads_per_worker: int = _setting(
        0, "runtime threads in each worker (0: its share of the cores, at least 1)", minimum=0
    )
    scale_in_idle_s: float = _setting(
        30.0, "seconds without waiting requests before a model's extra worker is let go", minimum=0
    )
    preload_runtimes: tuple[str, ...] = _setting(
        PRELOADABLE_RUNTIMES[:4],
        "runtimes the worker template imports where installed, shared by every worker (for "
        "TorchServe archives name torchserve, for other torch models torch: 177 MiB once "
        "instead of in each worker; a runtime left out is imported by each worker that needs it); "
        "the runtimes the cache's models needed at their last load are imported too, in place of "
        "the default when this is not given, as are those a local store's file names all tell "
        "on a fresh cache",
        choices=PRELOADABLE_RUNTIMES,
    )
    max_concurrency: int = _setting(
        0, "requests in flight in the whole server before 429 (0: no limit)", minimum=0
    )
    job_queue_size: int = _setting(
        100, "requests each model may queue before 429", props="job_queue_size", minimum=1
    )
    default_response_timeout_s: float = _setting(
        60.0,
        "seconds a request may take before 504",
        props="default_response_timeout",
        env=("SAGEMAKER_MODEL_SERVER_TIMEOUT", "SAGEMAKER_MODEL_SERVER_TIMEOUT_SECONDS"),
        minimum=0.001,
    )
    max_request_size: str = _setting(
        "6MiB",
        "largest request body (413 above)",
        props="max_request_size",
        env=("SAGEMAKER_MAX_PAYLOAD_IN_MB",),  # in MiB
        size="bytes",
    )
    default_accept: str = _setting(
        "application/json",
        "the media type an invocation without an Accept header, or with */*, is answered in",
        env=("SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT",),
    )
    max_rows_per_request: int = _setting(
        100_000, "most rows one request may carry to a built-in handler (413 above)", minimum=1
    )
    max_response_size: str = _setting(
        "6MiB", "largest response body", props="max_response_size", size="bytes"
    )
    batch_size: int = _setting(
        0,
        "largest batch of requests (0: 32 for built-in handlers, which predict a batch as one "
        "matrix, and 1 for your own handlers)",
        props="batch_size",
        minimum=0,
    )
    max_batch_delay_ms: int = _setting(
        0, "milliseconds to wait to fill a batch", props="max_batch_delay", minimum=0
    )
    load_models: tuple[str, ...] = _setting(
        (), "models to load at start: ALL, names, or name=path", props="load_models"
    )
    pinned_models: tuple[str, ...] = _setting((), "models never evicted")
    eviction_policy: str = _setting(
        "cost-aware",
        "which idle model a load evicts: cost-aware (fewest hits × reload time per byte, aged) or "
        "lru (least recently used, as SageMaker does; better where popularity moves within "
        "minutes)",
        choices=EVICTION_POLICIES,
    )
    admission: str = _setting(
        "tinylfu",
        "tinylfu: a load evicts models requested no more often than the one it loads first, so a "
        "scan of one-off models cannot flush the hot ones; none: the policy alone chooses (the "
        "default under sagemaker_contract)",
        choices=ADMISSIONS,
    )
    min_residency_s: float = _setting(
        0.0,
        "seconds a loaded model is safe from eviction, against thrashing (0: none)",
        minimum=0,
    )
    sizing_names: int = _setting(
        10_000,
        "model names the live miss-ratio curve (GET /sizing) tracks at most; past them it samples "
        "fewer (0: no curve)",
        minimum=0,
    )
    thrash_window_s: float = _setting(
        60.0,
        "seconds the thrash alarm counts over: it goes off when a tenth of their requests are for "
        "models evicted less than the cache's age before",
        minimum=1,
    )
    idle_unload_s: float = _setting(
        0.0,
        "seconds a model may go unused before it is unloaded (0: never, as in SageMaker)",
        minimum=0,
    )
    restore_registered: bool = _setting(
        False,
        "keep the models registered through TorchServe's management API (REST or gRPC) in the "
        "cache folder and register them again at start, loaded as they were registered, as "
        "TorchServe's snapshots restore them",
    )
    model_snapshot: str = _setting(
        "",
        "TorchServe's snapshot of registered models (JSON, as its snapshot .cfg files hold it): "
        "those not registered yet are registered at start, and it turns restore_registered on",
        props="model_snapshot",
    )
    multi_model: bool = _setting(
        True,
        "serve many models (SageMaker multi-model); false needs --single-model, the one model",
        env=("SAGEMAKER_MULTI_MODEL",),
    )
    single_model: str = _setting(
        "", "model /invocations uses without a target-model header (empty: none)"
    )
    sagemaker_contract: bool = _setting(
        False,
        "keep SageMaker's multi-model container contract to the letter (the container's "
        "multi-model mode): only POST /models loads, invoking a model not loaded is 404, GET "
        "/models lists loaded models as {modelName, modelUrl}, and a load that does not fit is "
        "507 rather than evicting (SageMaker chooses what to unload)",
    )
    management_port: int = _setting(
        0,
        "port of TorchServe's management API (register, describe, ...; 0: not served)",
        minimum=0,
        maximum=65535,
    )
    management_host: str = _setting("", "address the management API listens on (empty: --host)")
    management_api: str = _setting(
        "torchserve",
        "whose management API the management port speaks: torchserve (describe answers a list "
        "of one model) or mms (describe answers the model as one object; the default when "
        "MMS_CONFIG_FILE names the config.properties, as MMS is started)",
        choices=("torchserve", "mms"),
    )
    metrics_port: int = _setting(
        0,
        "a second port serving only GET /metrics, as TorchServe's metrics_address (0: none; "
        "/metrics is always on the main port too)",
        minimum=0,
        maximum=65535,
    )
    metrics_host: str = _setting("", "address the metrics port listens on (empty: --host)")
    torchserve_metrics: bool = _setting(
        False,
        "also serve TorchServe's metric names on the metrics port (Requests2XX, "
        "ts_inference_requests_total, ts_inference_latency_microseconds, "
        "ts_queue_latency_microseconds), over the same requests; config.properties "
        "metrics_mode=prometheus sets it",
    )
    grpc_port: int = _setting(
        0,
        "port of the gRPC inference services, the Open Inference Protocol's and TorchServe's, "
        "on --host (0: not served; Triton's clients expect 8001)",
        props="grpc_inference_port",
        minimum=0,
        maximum=65535,
    )
    grpc_host: str = _setting(
        "",
        "address the gRPC inference port listens on (empty: --host)",
        props="grpc_inference_address",
    )
    grpc_management_port: int = _setting(
        0,
        "port of TorchServe's gRPC management service (0: not served)",
        props="grpc_management_port",
        minimum=0,
        maximum=65535,
    )
    grpc_management_host: str = _setting(
        "",
        "address the gRPC management port listens on (empty: --management-host, else --host)",
        props="grpc_management_address",
    )
    grpc_front: str = _setting(
        "auto",
        "what serves the gRPC inference port: pygrpc-native (needs modelhost[grpc-native]), "
        "grpc.aio, h2corn (needs modelhost[grpc-h2corn]; no guard), or auto, pygrpc-native "
        "where it is installed",
        choices=("auto", "pygrpc-native", "grpc.aio", "h2corn"),
    )
    grpc_max_streams: int = _setting(
        128,
        "calls a gRPC connection may have open at once (HTTP/2 MAX_CONCURRENT_STREAMS)",
        minimum=1,
    )
    grpc_max_connections: int = _setting(
        64, "gRPC connections open at once on each gRPC port; more are refused", minimum=1
    )
    grpc_connections_per_s: float = _setting(
        8.0,
        "new gRPC connections a second from one address, after a burst of "
        "--grpc-max-connections; more are closed at once",
        minimum=0.001,
    )
    grpc_connection_idle_s: float = _setting(
        300.0, "seconds a gRPC connection may stay with no call open before GOAWAY", minimum=0.001
    )
    grpc_connection_age_s: float = _setting(
        3600.0,
        "seconds a gRPC connection may live before GOAWAY; its calls then have "
        "--drain-timeout-s to finish",
        minimum=0.001,
    )
    management_token: str = _setting(
        "", "bearer token that allows management calls from non-loopback addresses", secret=True
    )
    management_token_file: str = _setting(
        "",
        "file whose first line is the management token, reread while serving: rotate it with no "
        "restart (instead of management_token)",
    )
    token_auth: bool = _setting(
        False,
        "TorchServe's token authorization: key_file.json in the working folder holds a "
        "management, an inference and an API key, and each API's calls need its key as "
        "'Authorization: Bearer <key>' (GET /token?type= with the API key renews one); on when "
        "a TorchServe config.properties is read, unless it says disable_token_authorization=true",
    )
    model_api: bool = _setting(
        True,
        "TorchServe's model API control: whether its management API (REST and gRPC) may register "
        "and unregister models; off answers 405 (gRPC PERMISSION_DENIED), as TorchServe 0.11+ "
        "does by default, and so off when a TorchServe config.properties is read unless it says "
        "enable_model_api=true",
        props="enable_model_api",
    )
    token_expiration_min: float = _setting(
        60.0,
        "minutes a management or inference key of --token-auth lasts before GET /token renews it",
        props="token_expiration_min",
        minimum=0.001,
    )
    tenant_from: str = _setting(
        "",
        "who a request's tenant is: header (X-Modelhost-Tenant; header:NAME another header), "
        "name:N (the model name's first N path segments) or token (the bearer token, through "
        "--tenant-tokens-file); empty or off: one tenant",
    )
    tenant_tokens_file: str = _setting(
        "", "TOML file of bearer tokens and their tenants, for --tenant-from token"
    )
    tenant_models: str = _setting(
        "",
        "name:N: under --tenant-from header or token, a tenant invokes only the models whose "
        "first N path segments are its id, and those of N segments or fewer, which all share; "
        "another's is 403 (empty: any model)",
    )
    tenants_file: str = _setting(
        "",
        "TOML file of each tenant's weight, concurrency cap, rate, memory and disk shares and "
        "trust, reread when it changes (needs --tenant-from)",
    )
    untrusted_workers: int = _setting(
        0,
        "of the workers, how many are sandboxed for the models of tenants the tenants file "
        'gives trust = "untrusted" (needs --tenant-from or --tenant-models name:N)',
        minimum=0,
    )
    forwarded_allow_ips: str = _setting(
        "",
        "reverse proxies trusted to set X-Forwarded-For/-Proto: comma-separated addresses or "
        "networks, * for any (empty: those headers are ignored, the caller is the TCP peer)",
    )
    ssl_certfile: str = _setting(
        "", "TLS certificate file (PEM) to serve HTTPS (empty: HTTP)", props="certificate_file"
    )
    ssl_keyfile: str = _setting(
        "", "TLS private key file (PEM) for --ssl-certfile", props="private_key_file"
    )
    max_unpacked_bytes: str = _setting(
        "4GiB", "largest unpacked size of a model archive", size="bytes"
    )
    max_unpacked_files: int = _setting(10000, "most files in a model archive", minimum=1)
    instance_id: str = _setting(
        "",
        "name of this instance in every response's X-Modelhost-Instance header (empty: hostname)",
    )
    drain_timeout_s: float = _setting(25.0, "seconds to finish requests at shutdown", minimum=0)
    worker_load_timeout_s: float = _setting(
        300.0,
        "seconds a worker may take to load or unload a model (the handler's import and "
        "initialize included) before it is killed and replaced",
        props="default_startup_timeout",
        minimum=0.001,
    )
    worker_max_growth: str = _setting(
        "25%",
        "memory a worker may keep past its idle self and its models' measured footprints (a "
        "handler caching inputs, a leak): past it the worker is replaced and the model whose "
        "batches kept the most is blamed as for a crash; a size, a share of the memory budget, "
        "or 0 for no limit",
        size="percent",
        zero_is_off=True,
    )
    worker_max_scratch: str = _setting(
        "1GiB",
        "disk a sandboxed worker's scratch folder (its temporary folder and home, the one place "
        "its models may write) may hold; past it, or past 10,000 entries, the worker is replaced "
        "and its models blamed as for a crash (0: no limit)",
        size="bytes",
        zero_is_off=True,
    )
    refuse_pickle: bool = _setting(
        False,
        "refuse pickle-based artifacts (.joblib, .pkl, .pickle): a pickle runs code as it loads",
    )
    header_timeout_s: float = _setting(
        10.0, "seconds a client may take to send a request's headers (slowloris)", minimum=0.001
    )
    min_body_rate: int = _setting(
        500,
        "bytes a second a request's body must average once header_timeout_s has passed, or its "
        "connection is closed (a trickled body; 0: no minimum)",
        minimum=0,
    )
    send_timeout_s: float = _setting(
        60.0,
        "seconds answers may wait for a client that reads none of them before its connection "
        "is closed (nginx's send_timeout)",
        minimum=0.001,
    )
    max_connections: int = _setting(
        0,
        "open connections before new requests get 503 (uvicorn's limit_concurrency; 0: none)",
        minimum=0,
    )
    max_event_streams: int = _setting(64, "GET /events streams open at once before 503", minimum=1)
    log_level: str = _setting("info", "log level", choices=LOG_LEVELS)
    access_log: str = _setting("", "JSON-lines access log: a file path, - for stdout, empty: none")
    metrics_model_series: int = _setting(
        0,
        "models (largest first) with their own memory series in /metrics (0: none)",
        minimum=0,
        maximum=1000,
    )
    notices: tuple[str, ...] = ()  # what the server logs once at start: ignored properties keys
    # set by load_config: preload_runtimes was given, so the cache's runtimes only add to it
    preload_runtimes_given: bool = False
    # the tokens file's (token, tenant) pairs, read by load_config; never shown
    tenant_tokens: tuple[tuple[str, str], ...] = dataclasses.field(default=(), repr=False)
    # the size settings above, parsed once; the settings keep the text as given, for messages
    memory_budget_bytes: ByteBudget = dataclasses.field(init=False)
    frontend_allowance_bytes: int = dataclasses.field(init=False)
    disk_budget_bytes: ByteBudget = dataclasses.field(init=False)
    device_budget_bytes: ByteBudget = dataclasses.field(init=False)
    max_request_bytes: int = dataclasses.field(init=False)
    max_response_bytes: int = dataclasses.field(init=False)
    worker_max_growth_bytes: ByteBudget = dataclasses.field(init=False)
    worker_max_scratch_bytes: int = dataclasses.field(init=False)
    unpacked_limit_bytes: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        parsed = {
            "memory_budget_bytes": parse_budget(self.memory_budget),
            "frontend_allowance_bytes": parse_size(self.frontend_memory_allowance),
            "disk_budget_bytes": parse_budget(self.disk_budget),
            "device_budget_bytes": parse_budget(self.device_budget),
            "max_request_bytes": parse_size(self.max_request_size),
            "max_response_bytes": parse_size(self.max_response_size),
            "worker_max_growth_bytes": parse_budget(self.worker_max_growth),
            "worker_max_scratch_bytes": parse_size(self.worker_max_scratch),
            "unpacked_limit_bytes": parse_size(self.max_unpacked_bytes),
        }
        for name, value in parsed.items():
            object.__setattr__(self, name, value)  # frozen: set once, here


class CliOption(NamedTuple):
    """One `serve` flag, derived from a Config field or a config file option."""

    name: str  # its key in load_config's flags
    flag: str  # e.g. --model-store
    metavar: str
    is_bool: bool
    help: str


class FileOption(NamedTuple):
    """A flag or variable naming a config file, with its default file name and variables."""

    name: str
    default_name: str
    env: tuple[str, ...]
    help: str
    env_first: bool = False  # MMS and TorchServe read their variable before their flag


FILE_OPTIONS = (
    FileOption("config", "modelhost.toml", (), "modelhost.toml to read"),
    FileOption(
        "mms_config",
        "config.properties",
        ("MMS_CONFIG_FILE", "TS_CONFIG_FILE"),
        "MMS/TorchServe config.properties to read (MMS_CONFIG_FILE and TS_CONFIG_FILE win "
        "over this flag, as in MMS)",
        env_first=True,
    ),
)

Layer = dict[str, tuple[object, str]]  # field name -> (value as given, where it was given)


def env_name(field_name: str) -> str:
    """The MODELHOST_* variable of a setting."""
    return ENV_PREFIX + field_name.upper()


def flag_name(field_name: str) -> str:
    """The --flag of a setting."""
    return "--" + field_name.replace("_", "-")


def setting_fields() -> tuple[dataclasses.Field[Any], ...]:
    """The Config fields that are settings (every field with help text)."""
    return tuple(f for f in dataclasses.fields(Config) if "help" in f.metadata)


def setting_names() -> list[str]:
    """Names of all settings, in declaration order."""
    return [f.name for f in setting_fields()]


def is_secret(name: str) -> bool:
    return any(f.name == name and f.metadata["secret"] for f in setting_fields())


@functools.cache
def _type_hints() -> dict[str, Any]:
    """Config's field annotations, resolved (they are strings under `from __future__`)."""
    return typing.get_type_hints(Config)


def kind(f: dataclasses.Field[Any]) -> type:
    """The Python type of a setting: bool, int, float, str or tuple."""
    hint = _type_hints()[f.name]
    return typing.get_origin(hint) or hint  # type: ignore[no-any-return]
