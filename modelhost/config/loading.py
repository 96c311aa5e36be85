"""Settings read from every layer and checked against the table, and the `serve` flags."""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from modelhost.config.management_token import check_management_token
from modelhost.config.migration import props_layer, read_text, sagemaker_notices, thread_notices
from modelhost.config.settings import (
    ENV_PREFIX,
    ENV_UNITS,
    FILE_OPTIONS,
    CliOption,
    Config,
    FileOption,
    Layer,
    env_name,
    flag_name,
    kind,
    setting_fields,
    setting_names,
)
from modelhost.config.tenancy import (
    name_segments,
    own_models_segments,
    reads_token,
    tenant_tokens,
)
from modelhost.config.tenants_file import check_tenants_file
from modelhost.errors import ConfigError
from modelhost.units import parse_size

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_BOOL_WORDS = {"true": True, "1": True, "yes": True, "on": True}
_BOOL_WORDS |= {"false": False, "0": False, "no": False, "off": False}
_ANY_WHOLE_BYTES = 1 << 50  # checks a percentage's syntax when the whole is not known yet
# the ports the server listens on, each with the settings of its address, first set first
LISTENERS: dict[str, tuple[str, ...]] = {
    "port": (),
    "management_port": ("management_host",),
    "metrics_port": ("metrics_host",),
    "grpc_port": ("grpc_host",),
    "grpc_management_port": ("grpc_management_host", "management_host"),
}
WILDCARDS = {"0.0.0.0", "::", ""}  # every address of the machine


class _Expected(Exception):
    """A value of the wrong shape; the message says what was expected."""


def cli_options() -> Iterator[CliOption]:
    """The `serve` flags: one per setting, then --config and --mms-config."""
    metavars = {int: "INT", float: "NUMBER", str: "TEXT", tuple: "LIST", bool: ""}
    for f in setting_fields():
        metavar = "SIZE" if f.metadata["size"] else metavars[kind(f)]
        yield CliOption(f.name, flag_name(f.name), metavar, kind(f) is bool, _help(f))
    for option in FILE_OPTIONS:
        names = ", ".join((env_name(option.name), *option.env))
        text = f"{option.help} [env {names}; default ./{option.default_name} if present]"
        yield CliOption(option.name, flag_name(option.name), "FILE", False, text)


def _help(f: dataclasses.Field[Any]) -> str:
    """A setting's help line, with its default, variables and properties key."""
    default: Any = f.default
    shown = ",".join(default) if kind(f) is tuple else str(default)
    where = [f"default {(shown.lower() if kind(f) is bool else shown) or 'empty'}"]
    where.append("env " + ", ".join((env_name(f.name), *f.metadata["env"])))
    if f.metadata["props"]:
        where.append(f"config.properties {f.metadata['props']}")
    return f"{f.metadata['help']} [{'; '.join(where)}]"


def load_config(
    flags: Mapping[str, object] | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Config:
    """Read the settings from every layer; `flags` holds only what the user gave."""
    flags = {k: v for k, v in (flags or {}).items() if v is not None}
    environ = os.environ if environ is None else environ
    cwd = Path.cwd() if cwd is None else cwd
    toml_path, props_path = (_find_file(o, flags, environ, cwd) for o in FILE_OPTIONS)
    props, notices = props_layer(props_path, environ) if props_path else ({}, [])
    toml = _toml_layer(toml_path) if toml_path else {}
    values: dict[str, Any] = {}
    fields = {f.name: f for f in setting_fields()}
    for layer in (props, toml, _env_layer(environ), _flag_layer(flags)):
        values |= {name: _coerce(fields[name], *given) for name, given in layer.items()}
    notices += thread_notices(environ) + sagemaker_notices(environ)
    if values.get("sagemaker_contract"):
        values.setdefault("admission", "none")  # no load evicts: there is no victim to filter
    if environ.get("MMS_CONFIG_FILE"):  # started as MMS (or by SageMaker's toolkit)
        values.setdefault("management_api", "mms")
    if values.get("model_snapshot"):  # TorchServe restores a snapshot's models at start
        values.setdefault("restore_registered", True)
    if props_path and values.get("management_api") != "mms":  # TorchServe 0.11's default
        values.setdefault("token_auth", True)
        values.setdefault("model_api", False)
    tokens = tenant_tokens(values.get("tenant_from", ""), values.get("tenant_tokens_file", ""), cwd)
    given = "preload_runtimes" in values
    config = Config(
        **values, notices=tuple(notices), tenant_tokens=tokens, preload_runtimes_given=given
    )
    _refuse_unsupported(config)
    check_tenants_file(config, cwd)
    check_management_token(config, cwd)
    return config


def _refuse_unsupported(config: Config) -> None:
    """Settings that parse but ask for something modelhost does not do: a ConfigError."""
    if not config.multi_model and not config.single_model:
        raise ConfigError(
            "multi_model false (SAGEMAKER_MULTI_MODEL=false) asks for one model, but none is "
            "named: set --single-model NAME (MODELHOST_SINGLE_MODEL), the model POST "
            "/invocations serves without a target-model header, or unset it to serve many"
        )
    if config.untrusted_workers:
        _refuse_untrusted_workers(config)
    if config.fronts > 1 and config.ssl_certfile:  # the fronts relay plain HTTP
        raise ConfigError(
            f"--fronts {config.fronts} relays plain HTTP only: serve HTTPS with --fronts 1, or "
            "end TLS in a proxy in front"
        )
    _refuse_shared_ports(config)
    own_models_segments(config.tenant_models, config.tenant_from)
    if not re.fullmatch(r"[\w.+-]+/[\w.+-]+", config.default_accept):
        raise ConfigError(
            f"default_accept (SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT) is {config.default_accept!r}: "
            "give one media type, such as text/csv or application/json"
        )
    manages_by_token = config.management_token or config.management_token_file
    if config.token_auth and (manages_by_token or reads_token(config.tenant_from)):
        raise ConfigError(
            "token_auth gives management and inference calls TorchServe's keys, so a bearer "
            "token cannot also be the management_token or name a tenant (tenant_from token): "
            "unset those, or turn token authorization off (--no-token-auth, or "
            "disable_token_authorization=true in config.properties)"
        )
    if config.sagemaker_contract and (config.admission != "none" or config.min_residency_s):
        raise ConfigError(
            "admission and min_residency_s choose and delay the victims of a load, but under "
            "sagemaker_contract no load evicts (SageMaker unloads models on a 507): unset them, "
            "or set sagemaker_contract false (MODELHOST_SAGEMAKER_CONTRACT=false)"
        )


def _refuse_shared_ports(config: Config) -> None:
    """Two listeners on one address: the second would fail to bind."""
    taken: dict[tuple[str, int], str] = {}
    for name, host, port in listeners(config):
        if name == "management_port" and port == config.port:
            continue  # the management API on the main port, as asked
        for (other_host, other_port), other in taken.items():
            if port == other_port and (host == other_host or {host, other_host} & WILDCARDS):
                raise ConfigError(
                    f"{flag_name(name)} {port} is also {flag_name(other)}: each listener needs a "
                    "port of its own; choose another for one of them"
                )
        taken[(host, port)] = name


def listeners(config: Config) -> Iterator[tuple[str, str, int]]:
    """Each port set: its setting, address and number."""
    for name in LISTENERS:
        if port := getattr(config, name):
            yield name, listen_host(config, name), port


def listen_host(config: Config, port_name: str) -> str:
    """The address the port `port_name` listens on."""
    hosts = (getattr(config, name) for name in LISTENERS[port_name])
    return next((host for host in hosts if host), config.host)


def _refuse_untrusted_workers(config: Config) -> None:
    """Workers for untrusted tenants' models need tenants known by name."""
    if config.refuse_pickle:
        raise ConfigError(
            "--refuse-pickle sandboxes every worker for untrusted models: unset "
            "--untrusted-workers, or unset --refuse-pickle to trust all but the tenants the "
            'tenants file gives trust = "untrusted"'
        )
    if not name_segments(config.tenant_from, config.tenant_models):
        raise ConfigError(
            "--untrusted-workers host the models of untrusted tenants, whose models are known "
            "by their place in the store: set --tenant-from name:N (or --tenant-models name:N "
            "beside header or token), or unset --untrusted-workers"
        )


def properties_file(environ: Mapping[str, str], cwd: Path | None = None) -> Path | None:
    """The config.properties serve reads without --mms-config."""
    (option,) = [o for o in FILE_OPTIONS if o.name == "mms_config"]
    return _find_file(option, {}, environ, Path.cwd() if cwd is None else cwd)


def _find_file(
    option: FileOption, flags: Mapping[str, object], environ: Mapping[str, str], cwd: Path
) -> Path | None:
    """The config file a flag or variable names (it must exist), else the default if present."""
    named = [(flags.get(option.name), flag_name(option.name))]
    named += [(environ.get(var), var) for var in (env_name(option.name), *option.env)]
    if option.env_first:
        named = named[2:] + named[:2]  # MMS_CONFIG_FILE, --mms-config, MODELHOST_MMS_CONFIG
    for value, source in named:
        if value == "" and source.startswith(ENV_PREFIX):
            return None  # an empty MODELHOST_CONFIG: no file, not even the default
        if value:
            path = cwd / str(value)
            if not path.is_file():
                raise ConfigError(f"{source}: no such file {path}")
            return path
    default = cwd / option.default_name
    return default if default.is_file() else None


def _toml_layer(path: Path) -> Layer:
    """Settings from modelhost.toml; unknown keys are an error."""
    try:
        data = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(setting_names()))
    if unknown:
        raise _unknown(f"{path}: unknown key", unknown[0], setting_names())
    return {name: (value, f"{path}: {name}") for name, value in data.items()}


def _env_layer(environ: Mapping[str, str]) -> Layer:
    """Settings from MODELHOST_* and SageMaker variables; MODELHOST_* wins over SageMaker's.

    An empty MODELHOST_* variable is an empty value given; an empty SageMaker one is unset."""
    _check_env_names(environ)
    layer: Layer = {}
    for f in setting_fields():
        for var in (*f.metadata["env"], env_name(f.name)):
            if environ.get(var) or (var.startswith(ENV_PREFIX) and var in environ):
                layer[f.name] = (_with_unit(var, environ[var]), var)
    return layer


def _with_unit(var: str, value: str) -> str:
    return value + ENV_UNITS[var] if var in ENV_UNITS and value.strip().isdigit() else value


def _check_env_names(environ: Mapping[str, str]) -> None:
    """Refuse a MODELHOST_* variable that names no setting (a typo would be silently lost)."""
    known = [env_name(name) for name in setting_names() + [o.name for o in FILE_OPTIONS]]
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
    names = setting_names()
    layer: Layer = {}
    for name, value in flags.items():
        if name not in names and name not in [o.name for o in FILE_OPTIONS]:
            raise _unknown("unknown setting", name, names)
        if name in names:
            layer[name] = (value, flag_name(name))
    return layer


def _coerce(f: dataclasses.Field[Any], value: object, source: str) -> object:
    """A given value as its setting's type, checked against its limits."""
    try:
        if f.metadata["size"] and isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # a size in bytes, as TOML integers and properties give them
        result = _CONVERTERS[kind(f)](value)
        return _check_limits(f, result)
    except _Expected as exc:
        raise ConfigError(f"{source}: expected {exc}, got {value!r}") from None


def _check_limits(f: dataclasses.Field[Any], value: Any) -> object:
    """The value if it is within the setting's limits (log levels lowered); else _Expected."""
    meta = f.metadata
    if value == "" and f.default:  # an empty --cache-dir or --host would mean the cwd, or all
        raise _Expected(f"a value (unset it for the default {f.default})")
    if meta["size"]:
        _check_size(value, meta["size"] == "percent", meta["zero_is_off"])
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


def _check_size(text: str, percent_ok: bool, zero_ok: bool) -> None:
    """Raise _Expected unless text is a size above zero (or a percentage, or 0, where allowed)."""
    example = "a size such as 600MiB, 4GiB, 1.5G or 1000000"
    try:
        size_bytes = parse_size(text, _ANY_WHOLE_BYTES if percent_ok else None)
    except ConfigError:
        raise _Expected(example + (", or a percentage such as 80%" if percent_ok else "")) from None
    if size_bytes < 0 or (size_bytes == 0 and not zero_ok):
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
