"""What MMS, TorchServe and SageMaker users bring along: each key or variable mapped to a
setting, reported at start, or refused with what to do instead."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import NamedTuple

from modelhost.config.settings import FILE_OPTIONS, Layer, flag_name, setting_fields
from modelhost.errors import ConfigError

# the runtimes' thread variables: a user's value wins over threads_per_worker in every worker
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)

_PRELOAD_NOTICE = (
    "has no switch here: workers fork from a template that has imported the runtimes, so the "
    "libraries' pages are shared; model memory is not shared between workers: each copy of a "
    "model is loaded in its own worker"
)
_JAVA = "tunes MMS/TorchServe's Java frontend, which modelhost does not have"
_GRACE = (
    "has no setting of its own here: calls on a connection past its age have "
    "--drain-timeout-s to finish, as at shutdown"
)
_METRICS = "has no meaning here: modelhost's metrics are fixed (docs/observability.md)"
_LAUNCH = (
    "has no switch here: workers are not started through torch's CPU launcher; "
    "--threads-per-worker sets their threads"
)
_SEQUENCES = "has no meaning here: sequence batching (stateful inference) is not served"
_PROPS_NOTICES = {
    "preload_model": _PRELOAD_NOTICE,
    "vmargs": _JAVA,
    "number_of_netty_threads": _JAVA,
    "netty_client_threads": _JAVA,
    "async_logging": _JAVA,
    "use_native_io": _JAVA,
    "io_ratio": _JAVA,
    "initial_worker_port": "has no meaning here: workers talk to the frontend over Unix sockets",
    "number_of_gpu": "has no switch here: models use every CUDA device torch sees; --devices "
    "names them (--devices none: the CPU only)",
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
    "snapshot_store": "has no meaning here: models loaded at start come from load_models",
    "metrics_format": "has no meaning here: metrics are Prometheus text at GET /metrics",
    "metrics_config": _METRICS,
    "enable_metrics_api": "has no switch here: GET /metrics is always served",
    "disable_system_metrics": "has no switch here: modelhost reports memory and CPU always",
    "limit_max_image_pixels": "has no meaning here: no built-in handler decodes images",
    "enable_grpc_ssl": "has no switch here: gRPC uses TLS whenever certificate_file and "
    "private_key_file are set, as HTTP does",
    "grpc_management_max_connection_age_ms": "has no setting of its own here: both gRPC ports "
    "take --grpc-connection-age-s (grpc_inference_max_connection_age_ms sets it)",
    "grpc_inference_max_connection_age_grace_ms": _GRACE,
    "grpc_management_max_connection_age_grace_ms": _GRACE,
    "debug": "has no switch here: workers start as always; --log-level debug logs more",
    "model_metrics_auto_detect": _METRICS,
    "metric_time_interval": "has no meaning here: metrics are read when /metrics is scraped",
    "system_metrics_cmd": "has no meaning here: metrics are read when /metrics is scraped",
    "ipex_enable": "is read from the environment here: TorchServe's handlers check "
    "TS_IPEX_ENABLE, which the workers inherit; set TS_IPEX_ENABLE=true where the server starts",
    "ipex_gpu_enable": "has no switch here: models run on the CUDA devices of --devices, or the "
    "CPU",
    "cpu_launcher_enable": _LAUNCH,
    "cpu_launcher_args": _LAUNCH,
    "service_envelope": "has no meaning here: handlers get each body as sent; KServe v2 "
    "clients call /v2/models/{model}/infer, KServe v1 clients /v1/models/{model}:predict",
    "ts_open_inference_protocol": "is always on here: the Open Inference Protocol is served "
    "at /v2 and on --grpc-port",
    "model_server_home": _JAVA,
    "prefer_direct_buffer": _JAVA,
    "cpp_log_config": "has no meaning here: there is no C++ backend",
    "initial_distribution_port": "has no meaning here: a model is served whole by each worker, "
    "never spread over processes",
    "ts_header_key_sequence_id": _SEQUENCES,
    "ts_header_key_sequence_start": _SEQUENCES,
    "ts_header_key_sequence_end": _SEQUENCES,
    "use_env_allowed_urls": "has no meaning here: allowed URLs are --allowed-urls "
    "(MODELHOST_ALLOWED_URLS), as any setting",
}
# config.properties keys that would change what the server does if they were ignored
_PROPS_REFUSED = {
    "keystore": "convert the keystore to PEM and set certificate_file and private_key_file "
    "(--ssl-certfile, --ssl-keyfile)",
    "keystore_pass": "use an unencrypted PEM key with certificate_file and private_key_file",
    "keystore_type": "use PEM files with certificate_file and private_key_file",
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
}
# refused keys whose value asks for what modelhost does anyway: (that value, the notice)
_PROPS_AS_HERE = {
    "install_py_dep_per_model": ("false", "is what modelhost does: it installs no requirements"),
}


def _refusal(key: str, value: str) -> str:
    """Why `key=value` is refused; "" if it is not."""
    accepted, _ = _PROPS_AS_HERE.get(key, ("", ""))
    return "" if value.strip().lower() == accepted else _PROPS_REFUSED.get(key, "")


def thread_notices(environ: Mapping[str, str]) -> list[str]:
    """The user's thread variables the workers keep over threads_per_worker."""
    given = [f"{var}={environ[var]}" for var in THREAD_VARIABLES if environ.get(var)]
    if not given:
        return []
    return [f"{', '.join(given)} from the environment win over threads_per_worker in every worker"]


# SageMaker's other variables: (accepted values, why); other values stop the server
SAGEMAKER_OTHERS: dict[str, tuple[tuple[str, ...] | None, str]] = {
    "SAGEMAKER_SAFE_PORT_RANGE": (None, "has no use here: workers talk over Unix sockets"),
    "SAGEMAKER_HANDLER": (None, "has no use here: each model's handler is chosen from its files"),
    "SAGEMAKER_BASE_DIR": (None, "has no use here: the store is --model-store"),
    "SAGEMAKER_CONTAINER_LOG_LEVEL": (
        None,
        "has no use here: set MODELHOST_LOG_LEVEL (debug, info, warning, error)",
    ),
    "SAGEMAKER_SUBMIT_DIRECTORY": (
        None,
        "is not fetched here: each model runs the code/inference.py in its own folder",
    ),
    "SAGEMAKER_PROGRAM": (
        None,
        "is the script each model runs from its code/ folder, where it has one",
    ),
    "SAGEMAKER_ADDITIONAL_MODEL_SERVER_OPTIONS": (
        (),
        "passes options to MMS/TorchServe's command line; give modelhost's own flags or "
        "MODELHOST_* variables instead",
    ),
}


def sagemaker_notices(environ: Mapping[str, str]) -> list[str]:
    """Report SageMaker's variables that need nothing here; refuse values that would."""
    notices = []
    for var, (accepted, text) in SAGEMAKER_OTHERS.items():
        value = environ.get(var)
        if value and accepted is not None and value.strip().lower() not in accepted:
            raise ConfigError(f"{var}={value} is not supported here: {text}")
        if value:
            notices.append(f"{var}={value} {text}" if accepted is None else f"{var}={value}: ok")
    return notices


def read_text(path: Path) -> str:
    """A config file's text, less a byte order mark; a ConfigError if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from None


def _read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file: `key=value`, `key: value` or `key value`; # and ! comments.

    A trailing backslash continues a line; other escapes are kept as written.
    """
    text = re.sub(r"\\\r?\n[ \t\f]*", "", read_text(path))
    pairs: dict[str, str] = {}
    for line in text.splitlines():
        match = re.fullmatch(r"([^=:\s]+)(?:\s*[=:\s]\s*(.*))?", line.strip())
        if match and not line.lstrip().startswith(("#", "!")):
            pairs[match.group(1)] = (match.group(2) or "").strip()
    return pairs


def props_layer(path: Path, environ: Mapping[str, str]) -> tuple[Layer, list[str]]:
    """Settings from an MMS/TorchServe config.properties, and notices for keys not mapped."""
    by_key = {f.metadata["props"]: f.name for f in setting_fields() if f.metadata["props"]}
    layer: Layer = {}
    notices = []
    for key, (raw, source) in _properties_with_variables(path, environ).items():
        value = _substitute(raw, environ, source)
        where = source.removesuffix(f": {key}")
        if key in _PROPS_SPLIT:
            layer |= {name: (part, source) for name, part in _PROPS_SPLIT[key](value, source)}
        elif key in by_key:
            layer[by_key[key]] = (value, source)
        elif _refusal(key, value):
            raise ConfigError(f"{source}: '{key}' is not supported here; {_refusal(key, value)}")
        elif key in _PROPS_NOTICES:
            notices.append(f"{where}: '{key}' {_PROPS_NOTICES[key]}")
        elif key in _PROPS_AS_HERE:
            notices.append(f"{where}: '{key}={value}' {_PROPS_AS_HERE[key][1]}")
        else:
            notices.append(f"{where}: '{key}' has no meaning in modelhost; ignored")
    return layer, notices


def _properties_with_variables(
    path: Path, environ: Mapping[str, str]
) -> dict[str, tuple[str, str]]:
    """The file's keys, under MMS_/TS_ variables where enable_envvars_config says so."""
    pairs = {key: (value, f"{path}: {key}") for key, value in _read_properties(path).items()}
    if pairs.get("enable_envvars_config", ("", ""))[0].lower() != "true":
        return pairs
    files = {var for option in FILE_OPTIONS for var in option.env}
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
    by_key = {f.metadata["props"]: f.name for f in setting_fields() if f.metadata["props"]}
    if key in _PROPS_SPLIT:
        try:
            names = [name for name, _ in _PROPS_SPLIT[key](value, source)]
        except ConfigError as error:
            return Explained(source, value, "refused", str(error))
        return Explained(source, value, "maps", ", ".join(flag_name(n) for n in names))
    if key in by_key:
        return Explained(source, value, "maps", flag_name(by_key[key]))
    if _refusal(key, value):
        return Explained(source, value, "refused", _refusal(key, value))
    if key in _PROPS_NOTICES:
        return Explained(source, value, "reported", _PROPS_NOTICES[key])
    if key in _PROPS_AS_HERE:
        return Explained(source, value, "reported", _PROPS_AS_HERE[key][1])
    return Explained(source, value, "unknown", "has no meaning in modelhost; reported at start")


def _explain_variable(var: str, value: str) -> Explained:
    if var in SAGEMAKER_OTHERS:
        accepted, text = SAGEMAKER_OTHERS[var]
        refused = accepted is not None and value.strip().lower() not in accepted
        return Explained(var, value, "refused" if refused else "reported", text)
    if var in THREAD_VARIABLES:
        return Explained(var, value, "maps", "kept in every worker over --threads-per-worker")
    if any(o.env and var in o.env for o in FILE_OPTIONS):
        return Explained(var, value, "maps", "the config.properties to read")
    field = next(f for f in setting_fields() if var in f.metadata["env"])
    return Explained(var, value, "maps", flag_name(field.name))


def properties_keys() -> dict[str, str]:
    """Every config.properties key modelhost knows: "setting", "refused" or "notice"."""
    keys = {f.metadata["props"]: "setting" for f in setting_fields() if f.metadata["props"]}
    keys |= dict.fromkeys(_PROPS_SPLIT, "setting")
    return keys | dict.fromkeys(_PROPS_REFUSED, "refused") | dict.fromkeys(_PROPS_NOTICES, "notice")


def outside_variables() -> tuple[str, ...]:
    """The variables of other servers modelhost reads: SageMaker's, MMS's, the runtimes'."""
    named = [v for f in setting_fields() for v in f.metadata["env"]]
    files = (v for o in FILE_OPTIONS for v in o.env)
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


def _metrics_mode(value: str, source: str) -> list[tuple[str, str]]:
    """TorchServe's metric names when it asks for Prometheus metrics."""
    return [("torchserve_metrics", str(value.strip().lower() == "prometheus").lower())]


def _disable_token_authorization(value: str, source: str) -> list[tuple[str, str]]:
    """TorchServe 0.11's switch: true turns its token authorization off."""
    return [("token_auth", str(value.strip().lower() != "true").lower())]


def _enable_token_authorization(value: str, source: str) -> list[tuple[str, str]]:
    """TorchServe 0.10's switch, which 0.11 turned round."""
    return [("token_auth", value)]


def _grpc_connection_age(value: str, source: str) -> list[tuple[str, str]]:
    """TorchServe's connection age in milliseconds, as seconds."""
    try:
        return [("grpc_connection_age_s", str(float(value) / 1000))]
    except ValueError:
        raise ConfigError(f"{source}: expected milliseconds, got {value!r}") from None


_PROPS_SPLIT: dict[str, Callable[[str, str], list[tuple[str, str]]]] = {
    "grpc_inference_max_connection_age_ms": _grpc_connection_age,
    "disable_token_authorization": _disable_token_authorization,
    "enable_token_authorization": _enable_token_authorization,
    "metrics_mode": _metrics_mode,
    "inference_address": _split_address,
    "management_address": _split_management_address,
    "metrics_address": _split_metrics_address,
}
