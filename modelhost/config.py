"""The one typed configuration tree: the only reader of config files and environment variables.

Each field of `Config` carries its help text and, where they exist, its MMS/TorchServe
``config.properties`` key and its SageMaker variables. From those fields come, never written
twice, the ``MODELHOST_<FIELD>`` variables, the ``--field-name`` flags and the properties mapping.

Precedence, highest first: flags > environment > modelhost.toml > config.properties > defaults.
An empty environment variable counts as unset.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import os
import re
import sys
import typing
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from modelhost.errors import ConfigError
from modelhost.units import ByteBudget, parse_budget, parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ENV_PREFIX = "MODELHOST_"
LOG_LEVELS = ("debug", "info", "warning", "error", "critical")
EVICTION_POLICIES = ("lru", "cost-aware")  # modelhost.cache.policy.POLICIES
ADMISSIONS = ("none", "tinylfu")
OPTIONAL_RUNTIMES = ("xgboost", "lightgbm", "onnxruntime", "torch")
# the runtimes' thread variables: a user's value wins over threads_per_worker in every worker
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


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
) -> Any:
    """A Config field carrying its help, properties key, extra variables and limits.

    `size` is "bytes" for a size such as 6MiB, or "percent" where 80% (of a whole) is allowed too.
    """
    meta: dict[str, object] = {"help": help_text, "props": props, "env": env, "size": size}
    meta |= {"minimum": minimum, "maximum": maximum, "choices": choices}
    return dataclasses.field(default=default, metadata=meta)


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
        OPTIONAL_RUNTIMES[:3],
        "optional runtimes the worker template imports where installed, shared by every worker "
        "(add torch when serving torch models: 177 MiB once instead of in each worker)",
        choices=OPTIONAL_RUNTIMES,
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
        env=("SAGEMAKER_MODEL_SERVER_TIMEOUT",),
        minimum=0.001,
    )
    max_request_size: str = _setting(
        "6MiB", "largest request body (413 above)", props="max_request_size", size="bytes"
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
        "lru",
        "which idle model a load evicts: lru (least recently used, as in SageMaker) or "
        "cost-aware (fewest hits × reload time per byte, aged)",
        choices=EVICTION_POLICIES,
    )
    admission: str = _setting(
        "none",
        "tinylfu: a load evicts models requested no more often than the one it loads first, so a "
        "scan of one-off models cannot flush the hot ones; none: the policy alone chooses",
        choices=ADMISSIONS,
    )
    min_residency_s: float = _setting(
        0.0,
        "seconds a loaded model is safe from eviction, against thrashing (0: none)",
        minimum=0,
    )
    idle_unload_s: float = _setting(
        0.0,
        "seconds a model may go unused before it is unloaded (0: never, as in SageMaker)",
        minimum=0,
    )
    multi_model: bool = _setting(
        True,
        "serve many models (SageMaker multi-model); false needs --single-model, the one model",
        env=("SAGEMAKER_MULTI_MODEL",),
    )
    single_model: str = _setting(
        "", "model /invocations uses without a target-model header (empty: none)"
    )
    management_port: int = _setting(
        0,
        "port of TorchServe's management API (register, describe, ...; 0: not served)",
        minimum=0,
        maximum=65535,
    )
    management_host: str = _setting("", "address the management API listens on (empty: --host)")
    metrics_port: int = _setting(
        0,
        "a second port serving only GET /metrics, as TorchServe's metrics_address (0: none; "
        "/metrics is always on the main port too)",
        minimum=0,
        maximum=65535,
    )
    metrics_host: str = _setting("", "address the metrics port listens on (empty: --host)")
    management_token: str = _setting(
        "", "bearer token that allows management calls from non-loopback addresses"
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
        minimum=0.001,
    )
    refuse_pickle: bool = _setting(
        False,
        "refuse pickle-based artifacts (.joblib, .pkl, .pickle): a pickle runs code as it loads",
    )
    header_timeout_s: float = _setting(
        10.0, "seconds a client may take to send a request's headers (slowloris)", minimum=0.001
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
    # the size settings above, parsed once; the settings keep the text as given, for messages
    memory_budget_bytes: ByteBudget = dataclasses.field(init=False)
    disk_budget_bytes: ByteBudget = dataclasses.field(init=False)
    max_request_bytes: int = dataclasses.field(init=False)
    max_response_bytes: int = dataclasses.field(init=False)
    unpacked_limit_bytes: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        parsed = {
            "memory_budget_bytes": parse_budget(self.memory_budget),
            "disk_budget_bytes": parse_budget(self.disk_budget),
            "max_request_bytes": parse_size(self.max_request_size),
            "max_response_bytes": parse_size(self.max_response_size),
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


class _FileOption(NamedTuple):
    """A flag or variable naming a config file, with its default file name and variables."""

    name: str
    default_name: str
    env: tuple[str, ...]
    help: str
    env_first: bool = False  # MMS and TorchServe read their variable before their flag


_FILE_OPTIONS = (
    _FileOption("config", "modelhost.toml", (), "modelhost.toml to read"),
    _FileOption(
        "mms_config",
        "config.properties",
        ("MMS_CONFIG_FILE", "TS_CONFIG_FILE"),
        "MMS/TorchServe config.properties to read (MMS_CONFIG_FILE and TS_CONFIG_FILE win "
        "over this flag, as in MMS)",
        env_first=True,
    ),
)
_PRELOAD_NOTICE = (
    "has no switch here: workers fork from a template that has imported the runtimes, so the "
    "libraries' pages are shared; model memory is not shared between workers: each copy of a "
    "model is loaded in its own worker"
)
_JAVA = "tunes MMS/TorchServe's Java frontend, which modelhost does not have"
_PROPS_NOTICES = {
    "preload_model": _PRELOAD_NOTICE,
    "vmargs": _JAVA,
    "number_of_netty_threads": _JAVA,
    "netty_client_threads": _JAVA,
    "async_logging": _JAVA,
    "use_native_io": _JAVA,
    "io_ratio": _JAVA,
    "initial_worker_port": "has no meaning here: workers talk to the frontend over Unix sockets",
    "number_of_gpu": "has no meaning here: modelhost runs models on the CPU",
    "enable_envvars_config": "is always on here: $$NAME$$ in values and MMS_<KEY>/TS_<KEY> "
    "variables are read, and MODELHOST_* variables always",
    "decode_input_request": "has no switch here: handlers get each body as bytes, as MMS gives "
    "them with decode_input_request=false (what SageMaker's toolkit sets); a handler written "
    "for true must decode JSON itself",
    "blacklist_env_vars": "has no meaning here: handlers run in workers that inherit the server's "
    "environment",
    "default_service_handler": "has no meaning here: each model's handler is chosen from its "
    "files (a built-in one by framework, your handler.py, or code/inference.py with "
    "model_fn/input_fn/predict_fn/output_fn, as SageMaker's default handler service runs it)",
    "unregister_model_timeout": "has no meaning here: an unload waits for the model's requests, "
    "each bounded by default_response_timeout",
    "workflow_store": "has no meaning here: workflows (.war) and the Workflow API are not served",
    "model_snapshot": "has no meaning here: models loaded at start come from load_models",
    "snapshot_store": "has no meaning here: models loaded at start come from load_models",
    "metrics_mode": "has no meaning here: metrics are Prometheus text at GET /metrics",
    "metrics_format": "has no meaning here: metrics are Prometheus text at GET /metrics",
    "metrics_config": "has no meaning here: modelhost's metrics are fixed (docs/observability.md)",
    "enable_metrics_api": "has no switch here: GET /metrics is always served",
    "disable_system_metrics": "has no switch here: modelhost reports memory and CPU always",
    "enable_model_api": "has no switch here: the management API is on when management_port is "
    "set; calls need loopback or --management-token",
    "disable_token_authorization": "has no switch here: management calls need loopback, or "
    "Authorization: Bearer with --management-token",
    "limit_max_image_pixels": "has no meaning here: no built-in handler decodes images",
}
# config.properties keys that would change what the server does if they were ignored
_PROPS_REFUSED = {
    "keystore": "convert the keystore to PEM and set certificate_file and private_key_file "
    "(--ssl-certfile, --ssl-keyfile)",
    "keystore_pass": "use an unencrypted PEM key with certificate_file and private_key_file",
    "keystore_type": "use PEM files with certificate_file and private_key_file",
    "enable_token_authorization": "set --management-token TOKEN (MODELHOST_MANAGEMENT_TOKEN); "
    "management calls then need Authorization: Bearer TOKEN, inference calls need none",
    "grpc_inference_port": "modelhost speaks HTTP only: use POST /predictions/{model} or /v2",
    "grpc_management_port": "modelhost speaks HTTP only: use the management API over HTTP",
    "allowed_urls": "TorchServe's patterns are regular expressions; write them as glob patterns "
    "(* matches anything) in --allowed-urls (MODELHOST_ALLOWED_URLS)",
    "models": "per-model settings go in a manifest inside the model's artifact (modelhost.toml: "
    "handler, batch_size, max_batch_delay_ms, max_workers, pinned), or TorchServe's "
    "PUT /models/{model}?min_worker=N&max_worker=M",
    "install_py_dep_per_model": "install the models' requirements into the image or "
    "environment the server runs in",
    "cors_allowed_origin": "put a reverse proxy that sets CORS headers in front of modelhost",
    "cors_allowed_methods": "put a reverse proxy that sets CORS headers in front of modelhost",
    "cors_allowed_headers": "put a reverse proxy that sets CORS headers in front of modelhost",
    "plugins_path": "modelhost has no Java plugins; its seams are Python (docs/architecture.md)",
    "enable_grpc_ssl": "modelhost speaks HTTP only; set certificate_file and private_key_file",
}
_BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True}
_BOOL_WORDS |= {"false": False, "0": False, "no": False, "off": False}
_ANY_WHOLE_BYTES = 1 << 50  # checks a percentage's syntax when the whole is not known yet

Layer = dict[str, tuple[object, str]]  # field name -> (value as given, where it was given)


class _Expected(Exception):
    """A value of the wrong shape; the message says what was expected."""


def env_name(field_name: str) -> str:
    """The MODELHOST_* variable of a setting."""
    return ENV_PREFIX + field_name.upper()


def _flag_name(field_name: str) -> str:
    """The --flag of a setting."""
    return "--" + field_name.replace("_", "-")


def _settings() -> tuple[dataclasses.Field[Any], ...]:
    """The Config fields that are settings (every field with help text)."""
    return tuple(f for f in dataclasses.fields(Config) if "help" in f.metadata)


def _setting_names() -> list[str]:
    """Names of all settings, in declaration order."""
    return [f.name for f in _settings()]


@functools.cache
def _type_hints() -> dict[str, Any]:
    """Config's field annotations, resolved (they are strings under `from __future__`)."""
    return typing.get_type_hints(Config)


def _kind(f: dataclasses.Field[Any]) -> type:
    """The Python type of a setting: bool, int, float, str or tuple."""
    hint = _type_hints()[f.name]
    return typing.get_origin(hint) or hint  # type: ignore[no-any-return]


def cli_options() -> Iterator[CliOption]:
    """The `serve` flags: one per setting, then --config and --mms-config."""
    metavars = {int: "INT", float: "NUMBER", str: "TEXT", tuple: "LIST", bool: ""}
    for f in _settings():
        metavar = "SIZE" if f.metadata["size"] else metavars[_kind(f)]
        yield CliOption(f.name, _flag_name(f.name), metavar, _kind(f) is bool, _help(f))
    for option in _FILE_OPTIONS:
        names = ", ".join((env_name(option.name), *option.env))
        text = f"{option.help} [env {names}; default ./{option.default_name} if present]"
        yield CliOption(option.name, _flag_name(option.name), "FILE", False, text)


def _help(f: dataclasses.Field[Any]) -> str:
    """A setting's help line, with its default, variables and properties key."""
    default: Any = f.default
    shown = ",".join(default) if _kind(f) is tuple else str(default)
    where = [f"default {(shown.lower() if _kind(f) is bool else shown) or 'empty'}"]
    where.append("env " + ", ".join((env_name(f.name), *f.metadata["env"])))
    if f.metadata["props"]:
        where.append(f"config.properties {f.metadata['props']}")
    return f"{f.metadata['help']} [{'; '.join(where)}]"


def load_config(
    flags: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Read the settings from flags, environment, modelhost.toml, config.properties, defaults.

    `flags` holds only what the user gave, keyed by field name, plus "config" and "mms_config"
    for the file flags. Relative file paths are taken from `cwd`.
    """
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    toml_path, props_path = (_find_file(o, flags, environ, cwd) for o in _FILE_OPTIONS)
    props, notices = _props_layer(props_path, environ) if props_path else ({}, [])
    toml = _toml_layer(toml_path) if toml_path else {}
    values: dict[str, Any] = {}
    fields = {f.name: f for f in _settings()}
    for layer in (props, toml, _env_layer(environ), _flag_layer(flags)):
        values |= {name: _coerce(fields[name], *given) for name, given in layer.items()}
    notices += _thread_notices(environ) + _sagemaker_notices(environ)
    config = Config(**values, notices=tuple(notices))
    _refuse_unsupported(config)
    return config


def _thread_notices(environ: Mapping[str, str]) -> list[str]:
    """Say which of the user's thread variables the workers keep instead of threads_per_worker."""
    given = [f"{var}={environ[var]}" for var in THREAD_VARIABLES if environ.get(var)]
    if not given:
        return []
    return [f"{', '.join(given)} from the environment win over threads_per_worker in every worker"]


# sagemaker-inference-toolkit's and SageMaker's other variables: (accepted values, why or what
# to use); a value outside the accepted ones stops the server, any other is reported at start
SAGEMAKER_OTHERS: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "SAGEMAKER_SAFE_PORT_RANGE": (None, "has no use here: workers talk over Unix sockets"),
    "SAGEMAKER_HANDLER": (None, "has no use here: each model's handler is chosen from its files"),
    "SAGEMAKER_BASE_DIR": (None, "has no use here: the store is --model-store"),
    "SAGEMAKER_CONTAINER_LOG_LEVEL": (
        None,
        "has no use here: set MODELHOST_LOG_LEVEL (debug, info, warning, error)",
    ),
    "SAGEMAKER_PROGRAM": (
        ("inference.py",),
        "names the inference script; modelhost runs code/inference.py in each model's folder: "
        "rename the script to inference.py",
    ),
    "SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT": (
        ("application/json",),
        "answers without an Accept header are JSON here; send an Accept header instead",
    ),
    "SAGEMAKER_ADDITIONAL_MODEL_SERVER_OPTIONS": (
        (),
        "passes options to MMS/TorchServe's command line; give modelhost's own flags or "
        "MODELHOST_* variables instead",
    ),
}


def _sagemaker_notices(environ: Mapping[str, str]) -> list[str]:
    """Report SageMaker's variables that need nothing here; refuse values that would."""
    notices = []
    for var, (accepted, text) in SAGEMAKER_OTHERS.items():
        value = environ.get(var)
        if value and accepted is not None and value.strip().lower() not in accepted:
            raise ConfigError(f"{var}={value} is not supported here: {text}")
        if value:
            notices.append(f"{var}={value} {text}" if accepted is None else f"{var}={value}: ok")
    return notices


def _refuse_unsupported(config: Config) -> None:
    """Settings that parse but ask for something modelhost does not do: a ConfigError."""
    if not config.multi_model and not config.single_model:
        raise ConfigError(
            "multi_model false (SAGEMAKER_MULTI_MODEL=false) asks for one model, but none is "
            "named: set --single-model NAME (MODELHOST_SINGLE_MODEL), the model POST "
            "/invocations serves without a target-model header, or unset it to serve many"
        )


def _find_file(
    option: _FileOption, flags: Mapping[str, object], environ: Mapping[str, str], cwd: Path
) -> Path | None:
    """The config file a flag or variable names (it must exist), else the default if present."""
    named = [(flags.get(option.name), _flag_name(option.name))]
    named += [(environ.get(var), var) for var in (env_name(option.name), *option.env)]
    if option.env_first:
        named = named[2:] + named[:2]  # MMS_CONFIG_FILE, --mms-config, MODELHOST_MMS_CONFIG
    for value, source in named:
        if value:
            path = cwd / str(value)
            if not path.is_file():
                raise ConfigError(f"{source}: no such file {path}")
            return path
    default = cwd / option.default_name
    return default if default.is_file() else None


def _read_text(path: Path) -> str:
    """A config file's text; a ConfigError if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def _toml_layer(path: Path) -> Layer:
    """Settings from modelhost.toml; unknown keys are an error."""
    try:
        data = tomllib.loads(_read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_setting_names()))
    if unknown:
        raise _unknown(f"{path}: unknown key", unknown[0], _setting_names())
    return {name: (value, f"{path}: {name}") for name, value in data.items()}


def _read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file: `key=value`, `key: value` or `key value`; # and ! comments.

    A trailing backslash continues a line; other escapes are kept as written.
    """
    text = re.sub(r"\\\r?\n[ \t\f]*", "", _read_text(path))
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([^=:\s]+)(?:\s*[=:\s]\s*(.*))?", line.strip())
        if match and not line.lstrip().startswith(("#", "!")):
            pairs[match.group(1)] = (match.group(2) or "").strip()
    return pairs


def _props_layer(path: Path, environ: Mapping[str, str]) -> tuple[Layer, list[str]]:
    """Settings from an MMS/TorchServe config.properties, and notices for keys not mapped."""
    by_key = {f.metadata["props"]: f.name for f in _settings() if f.metadata["props"]}
    layer: Layer = {}
    notices = []
    for key, (raw, source) in _properties_with_variables(path, environ).items():
        value = _substitute(raw, environ, source)
        where = source.removesuffix(f": {key}")
        if key in _PROPS_SPLIT:
            layer |= {name: (part, source) for name, part in _PROPS_SPLIT[key](value, source)}
        elif key in by_key:
            layer[by_key[key]] = (value, source)
        elif key in _PROPS_REFUSED:
            raise ConfigError(f"{source}: '{key}' is not supported here; {_PROPS_REFUSED[key]}")
        elif key in _PROPS_NOTICES:
            notices.append(f"{where}: '{key}' {_PROPS_NOTICES[key]}")
        else:
            notices.append(f"{where}: '{key}' has no meaning in modelhost; ignored")
    return layer, notices


def _properties_with_variables(
    path: Path, environ: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """The file's keys, and with enable_envvars_config=true MMS_<KEY>/TS_<KEY> variables over
    them, as MMS and TorchServe read them; each with where it was given."""
    pairs = {key: (value, f"{path}: {key}") for key, value in _read_properties(path).items()}
    if pairs.get("enable_envvars_config", ("", ""))[0].lower() != "true":
        return pairs
    files = {var for option in _FILE_OPTIONS for var in option.env}
    for var, value in environ.items():
        prefix = next((p for p in ("MMS_", "TS_") if var.startswith(p)), "")
        if prefix and value and var not in files:
            pairs[var[len(prefix) :].lower()] = (value, var)
    return pairs


def _substitute(value: str, environ: Mapping[str, str], source: str) -> str:
    """MMS's $$NAME$$ in a value: the variable NAME's value; refused if it is not set."""

    def variable(match: re.Match[str]) -> str:
        if not environ.get(match.group(1)):
            raise ConfigError(
                f"{source}: {match.group(0)} names {match.group(1)}, which is not set"
            )
        return environ[match.group(1)]

    return re.sub(r"\$\$([A-Za-z_][A-Za-z0-9_]*)\$\$", variable, value)


class Explained(NamedTuple):
    """What modelhost makes of one key of a config.properties or one outside variable."""

    source: str  # the file and key, or the variable
    value: str
    outcome: str  # "maps", "reported", "refused" or "unknown"
    detail: str  # the modelhost setting it sets, or the reason


def explain(path: Path | None, environ: Mapping[str, str]) -> list[Explained]:
    """Each key of `path` and each variable of other servers in `environ`, explained."""
    rows = []
    if path is not None:
        for key, (value, source) in _properties_with_variables(path, environ).items():
            rows.append(_explain_key(key, value, source))
    for var in outside_variables():
        if environ.get(var):
            rows.append(_explain_variable(var, environ[var]))
    return rows


def _explain_key(key: str, value: str, source: str) -> Explained:
    by_key = {f.metadata["props"]: f.name for f in _settings() if f.metadata["props"]}
    if key in _PROPS_SPLIT:
        names = [name for name, _ in _PROPS_SPLIT[key]("http://h:1", source)]
        return Explained(source, value, "maps", ", ".join(_flag_name(n) for n in names))
    if key in by_key:
        return Explained(source, value, "maps", _flag_name(by_key[key]))
    if key in _PROPS_REFUSED:
        return Explained(source, value, "refused", _PROPS_REFUSED[key])
    if key in _PROPS_NOTICES:
        return Explained(source, value, "reported", _PROPS_NOTICES[key])
    return Explained(source, value, "unknown", "has no meaning in modelhost; reported at start")


def _explain_variable(var: str, value: str) -> Explained:
    if var in SAGEMAKER_OTHERS:
        accepted, text = SAGEMAKER_OTHERS[var]
        refused = accepted is not None and value.strip().lower() not in accepted
        return Explained(var, value, "refused" if refused else "reported", text)
    if var in THREAD_VARIABLES:
        return Explained(var, value, "maps", "kept in every worker over --threads-per-worker")
    if any(o.env and var in o.env for o in _FILE_OPTIONS):
        return Explained(var, value, "maps", "the config.properties to read")
    field = next(f for f in _settings() if var in f.metadata["env"])
    return Explained(var, value, "maps", _flag_name(field.name))


def properties_keys() -> dict[str, str]:
    """Every config.properties key modelhost knows: "setting", "refused" or "notice"."""
    keys = {f.metadata["props"]: "setting" for f in _settings() if f.metadata["props"]}
    keys |= dict.fromkeys(_PROPS_SPLIT, "setting")
    return keys | dict.fromkeys(_PROPS_REFUSED, "refused") | dict.fromkeys(_PROPS_NOTICES, "notice")


def outside_variables() -> tuple[str, ...]:
    """The variables of other servers modelhost reads: SageMaker's, MMS's, the runtimes'."""
    named = [v for f in _settings() for v in f.metadata["env"]]
    files = (v for o in _FILE_OPTIONS for v in o.env)
    return (*named, *files, *THREAD_VARIABLES, *SAGEMAKER_OTHERS)


def _split_address(value: str, source: str) -> list[tuple[str, str]]:
    """Host and port from an MMS inference_address such as http://0.0.0.0:8080."""
    parts = urllib.parse.urlsplit(value if "://" in value else f"http://{value}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = None
    if port is None or not parts.hostname:
        raise ConfigError(f"{source}: expected an address like http://0.0.0.0:8080, got {value!r}")
    return [("host", parts.hostname), ("port", str(port))]


def _split_management_address(value: str, source: str) -> list[tuple[str, str]]:
    """Host and port of the management API from a management_address."""
    return [("management_" + name, part) for name, part in _split_address(value, source)]


def _split_metrics_address(value: str, source: str) -> list[tuple[str, str]]:
    """Host and port of the metrics port from TorchServe's metrics_address."""
    return [("metrics_" + name, part) for name, part in _split_address(value, source)]


_PROPS_SPLIT: dict[str, Callable[[str, str], list[tuple[str, str]]]] = {
    "inference_address": _split_address,
    "management_address": _split_management_address,
    "metrics_address": _split_metrics_address,
}


def _env_layer(environ: Mapping[str, str]) -> Layer:
    """Settings from MODELHOST_* and SageMaker variables; MODELHOST_* wins over SageMaker's."""
    _check_env_names(environ)
    layer: Layer = {}
    for f in _settings():
        for var in (*f.metadata["env"], env_name(f.name)):
            if environ.get(var):
                layer[f.name] = (environ[var], var)
    return layer


def _check_env_names(environ: Mapping[str, str]) -> None:
    """Refuse a MODELHOST_* variable that names no setting (a typo would be silently lost)."""
    known = [env_name(name) for name in _setting_names() + [o.name for o in _FILE_OPTIONS]]
    unknown = sorted(k for k in environ if k.startswith(ENV_PREFIX) and k not in known)
    if unknown:
        raise _unknown("unknown variable", unknown[0], known)


def _unknown(what: str, name: str, valid: list[str]) -> ConfigError:
    """An error for a name that is not a setting, with the likeliest meant one and all valid."""
    close = difflib.get_close_matches(name, valid, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(f"{what} {name}{hint}; valid ones: {', '.join(valid)}")


def _flag_layer(flags: Mapping[str, object]) -> Layer:
    """Settings from command-line flags (the file flags are already spent)."""
    names = _setting_names()
    layer: Layer = {}
    for name, value in flags.items():
        if name not in names and name not in [o.name for o in _FILE_OPTIONS]:
            raise _unknown("unknown setting", name, names)
        if name in names:
            layer[name] = (value, _flag_name(name))
    return layer


def _coerce(f: dataclasses.Field[Any], value: object, source: str) -> object:
    """A given value as its setting's type, checked against its limits."""
    try:
        if f.metadata["size"] and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a size in bytes, as TOML integers and properties give them
        result = _CONVERTERS[_kind(f)](value)
        return _check_limits(f, result)
    except _Expected as exc:
        raise ConfigError(f"{source}: expected {exc}, got {value!r}") from None


def _check_limits(f: dataclasses.Field[Any], value: Any) -> object:
    """The value if it is within the setting's limits (log levels lowered); else _Expected."""
    meta = f.metadata
    if meta["size"]:
        _check_size(value, percent_ok=meta["size"] == "percent")
    if meta["minimum"] is not None and value < meta["minimum"]:
        raise _Expected(f"at least {meta['minimum']}")
    if meta["maximum"] is not None and value > meta["maximum"]:
        raise _Expected(f"at most {meta['maximum']}")
    return _check_choices(value, meta["choices"]) if meta["choices"] else value


def _check_choices(value: str | tuple[str, ...], choices: tuple[str, ...]) -> object:
    """The value lowered if it (or each item of a list) is one of `choices`; else _Expected."""
    items = tuple(item.lower() for item in (value if isinstance(value, tuple) else (value,)))
    if any(item not in choices for item in items):
        each = "each one of" if isinstance(value, tuple) else "one of"
        raise _Expected(f"{each} {', '.join(choices)}")
    return items if isinstance(value, tuple) else items[0]


def _check_size(text: str, percent_ok: bool) -> None:
    """Raise _Expected unless text is a size above zero (or a percentage, where allowed)."""
    example = "a size such as 600MiB, 4GiB, 1.5G or 1000000"
    try:
        size_bytes = parse_size(text, _ANY_WHOLE_BYTES if percent_ok else None)
    except ConfigError:
        raise _Expected(example + (", or a percentage such as 80%" if percent_ok else "")) from None
    if size_bytes <= 0:
        raise _Expected("a size above zero")


def _to_bool(value: object) -> bool:
    """A bool, or true/false, yes/no, on/off, 1/0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _BOOL_WORDS:
        return _BOOL_WORDS[value.strip().lower()]
    raise _Expected("true or false")


def _to_int(value: object) -> int:
    """An int, or text of a whole number."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value):
        return int(value)
    raise _Expected("a whole number")


def _to_float(value: object) -> float:
    """A finite number, or its text."""
    try:
        number = float(value) if isinstance(value, (int, float, str)) else math.nan
    except ValueError:
        number = math.nan
    if isinstance(value, bool) or not math.isfinite(number):
        raise _Expected("a number")
    return number


def _to_str(value: object) -> str:
    """Text."""
    if not isinstance(value, str):
        raise _Expected("text")
    return value


def _to_strings(value: object) -> tuple[str, ...]:
    """A list of strings, or comma-separated text."""
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return tuple(value)
    raise _Expected("a comma-separated list, or a list of strings")


_CONVERTERS: dict[type, Callable[[object], object]] = {
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    str: _to_str,
    tuple: _to_strings,
}
