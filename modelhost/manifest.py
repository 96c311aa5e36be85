"""A model's own settings, from `modelhost.toml` in its artifact or a `.mar`'s manifest.

The keys are in docs/models.md, "Model manifest". Unknown keys are refused, so a typo never
silently does nothing. `modelhost.toml` wins over a `.mar`'s manifest.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

from modelhost import names
from modelhost.errors import ConfigError, ModelLoadError
from modelhost.units import MOST_COUNT, parse_size
from modelhost.workers.handlers.ts_context import model_yaml_config
from modelhost.workers.handlers.ts_defaults import BY_MODEL_FILE
from modelhost.workers.signatures import Signature, TensorSpec, declared

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST_NAME = names.MANIFEST_NAME
DEVICE = re.compile(r"cpu|cuda:[0-9]+")
MAR_MANIFEST = Path(names.MAR_MANIFEST)


@dataclass(frozen=True, kw_only=True)
class Manifest:
    """A model's own settings; None means the server's setting."""

    handler: str | None = None
    model_file: str | None = None
    batch_size: int | None = None
    max_batch_delay_ms: float | None = None
    max_workers: int | None = None
    pinned: bool = False
    memory_bytes: int | None = None
    warmup: tuple[str, ...] = ()
    idempotent: bool = False
    threads: int | None = None
    response_timeout_s: float | None = None
    load_timeout_s: float | None = None  # the load's and the unload's
    idle_unload_s: float | None = None  # 0: never
    device: str | None = None  # "cpu", or a device such as "cuda:1"; None: any with room
    inputs: tuple[TensorSpec, ...] = ()  # OIP metadata's, over the handler's
    outputs: tuple[TensorSpec, ...] = ()

    @property
    def signature(self) -> Signature:
        return Signature(self.inputs, self.outputs)


NO_MANIFEST = Manifest()
_TIMEOUTS = ("response_timeout_s", "load_timeout_s")
_COUNT = "a whole number of at least 1"
# each number's words, test and type
_NUMBERS: dict[str, tuple[str, Callable[[float], bool], Callable[[float], float]]] = {
    "batch_size": (_COUNT, lambda n: n >= 1, int),
    "max_workers": (_COUNT, lambda n: n >= 1, int),
    "threads": (_COUNT, lambda n: n >= 1, int),
    "max_batch_delay_ms": ("a number of at least 0", lambda n: n >= 0, float),
    "response_timeout_s": ("a number of seconds above 0", lambda n: n > 0, float),
    "load_timeout_s": ("a number of seconds above 0", lambda n: n > 0, float),
    "idle_unload_s": ("a number of seconds, 0 or more", lambda n: n >= 0, float),
}
_TYPES: dict[str, type | tuple[type, ...]] = {
    "handler": str,
    "model_file": str,
    "device": str,
    "pinned": bool,
    "idempotent": bool,
    "memory": (str, int),
    "warmup": list,
}
_TYPE_WORDS = {
    "handler": 'a string such as "xgboost" or "handler.py"',
    "device": '"cpu", or a device such as "cuda:1"',
    "model_file": "a path in the artifact, as a string",
    "pinned": "true or false",
    "idempotent": "true or false",
    "memory": 'a size such as "300MiB", or a number of bytes',
    "warmup": 'a list of paths in the artifact, such as ["samples/0.json"]',
}


def read_manifest(artifact: Path) -> Manifest:
    """The manifest of an unpacked artifact, or the empty one."""
    root = manifest_root(artifact)
    mar = root / MAR_MANIFEST
    manifest = _read_mar(mar, root) if mar.is_file() else NO_MANIFEST
    path = root / MANIFEST_NAME
    if not path.is_file():
        return manifest
    try:
        table = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ModelLoadError(f"{MANIFEST_NAME} is not valid TOML: {error}") from None
    own = parse_manifest(table)
    return dataclasses.replace(manifest, **{key: getattr(own, key) for key in _given(table)})


def mar_workers(artifact: Path) -> tuple[int, int]:
    """model-config.yaml's (minWorkers, maxWorkers), which TorchServe starts at registration;
    (0, 0) unless both are whole and 0 < min <= max, as TorchServe reads them."""
    root = manifest_root(artifact)
    try:  # a broken archive fails its load, which says why
        config = model_yaml_config(root, read_mar(root / MAR_MANIFEST))
    except (ModelLoadError, OSError):
        return 0, 0
    low, high = config.get("minWorkers"), config.get("maxWorkers")
    if not (_is_whole(low) and _is_whole(high) and 0 < low <= high):
        return 0, 0
    return low, high


def find_manifest(artifact: Path) -> Path | None:
    """`modelhost.toml`, else the MAR manifest, in the artifact or its lone top folder."""
    if not artifact.is_dir():
        return None
    for name in (MANIFEST_NAME, MAR_MANIFEST.as_posix()):
        candidates = [artifact / name, *artifact.glob(f"*/{name}")]
        found = next((path for path in candidates if path.is_file()), None)
        if found is not None:
            return found
    return None


def manifest_root(artifact: Path) -> Path:
    path = find_manifest(artifact)
    if path is None:
        return artifact
    return path.parent if path.name == MANIFEST_NAME else path.parent.parent


def _given(table: dict[str, Any]) -> list[str]:
    return ["memory_bytes" if key == "memory" else key for key in table]


def read_mar(path: Path) -> dict[str, Any]:
    """A MAR manifest whose "model" is an object."""
    try:
        document = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise ModelLoadError(
            f"{MAR_MANIFEST} is not valid JSON ({error}); rebuild the .mar"
        ) from None
    if not isinstance(document, dict) or not isinstance(document.get("model"), dict):
        raise ModelLoadError(f'{MAR_MANIFEST} has no "model" object; rebuild the .mar')
    return document


def _read_mar(path: Path, root: Path) -> Manifest:
    document = read_mar(path)
    model = document["model"]
    handler, serialized = model.get("handler"), model.get("serializedFile")
    file_name = str(handler or "").partition(":")[0]
    if file_name and not file_name.endswith(".py"):
        handler = file_name + ".py" + str(handler)[len(file_name) :]
        file_name += ".py"
    is_file = bool(file_name) and (root / file_name).is_file()
    # any other name is a TorchServe built-in (or a typo): the worker resolves it
    by_model_file = is_file or file_name.removesuffix(".py") in ("", *BY_MODEL_FILE)
    return Manifest(
        handler=str(handler) if is_file else None,
        model_file=str(serialized) if serialized and by_model_file else None,
        **_mar_scheduling(model_yaml_config(root, document)),
    )


# TorchServe's model-config.yaml keys, modelhost's names, and the least each may be
_MAR_CONFIG_KEYS = {
    "batchSize": ("batch_size", 1),
    "maxBatchDelay": ("max_batch_delay_ms", 0),
    "maxWorkers": ("max_workers", 1),
    "responseTimeout": ("response_timeout_s", 0),  # seconds, as here
    "startupTimeout": ("load_timeout_s", 0),
    "idle_unload_s": ("idle_unload_s", 0),  # modelhost's own, under the manifest's name
}


def _mar_scheduling(config: dict[str, Any]) -> dict[str, Any]:
    """The batching, workers and timeouts a `.mar`'s model-config.yaml sets."""
    found: dict[str, Any] = {}
    for key, (name, least) in _MAR_CONFIG_KEYS.items():
        value = config.get(key)
        if value is None:
            continue
        timeout = name in _TIMEOUTS
        if not _is_number(value) or value < least or (timeout and value <= 0):
            bound = ("above 0" if timeout else f"of at least {least}") + f", at most {MOST_COUNT}"
            raise ModelLoadError(
                f"model-config.yaml sets {key} to {value!r}; it must be a number {bound}: fix "
                "it and rebuild the .mar"
            )
        found[name] = int(value) if least == 1 else float(value)
    return found


def _is_whole(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)  # True is an int


def _is_number(value: object) -> TypeGuard[float]:
    """Finite, within MOST_COUNT: NaN hangs requests or kills workers."""
    if isinstance(value, float):
        return math.isfinite(value) and abs(value) <= MOST_COUNT
    return _is_whole(value) and abs(value) <= MOST_COUNT


def parse_manifest(table: dict[str, Any]) -> Manifest:
    unknown = set(table) - set(Manifest.__dataclass_fields__) - {"memory"}
    if unknown:
        allowed = ", ".join(sorted({*Manifest.__dataclass_fields__, "memory"} - {"memory_bytes"}))
        raise ModelLoadError(
            f"{MANIFEST_NAME} has unknown keys {sorted(unknown)}; allowed: {allowed}"
        )
    fields = dict(table)
    for key, kind in _TYPES.items():
        wrong_bool = isinstance(fields.get(key), bool) and kind is not bool  # True is an int
        if key in fields and (wrong_bool or not isinstance(fields[key], kind)):
            raise ModelLoadError(f"{MANIFEST_NAME}: {key} must be {_TYPE_WORDS[key]}")
    for key in _NUMBERS:
        if key in fields:
            fields[key] = _number(key, fields[key])
    if "memory" in fields:
        fields["memory_bytes"] = _size(fields.pop("memory"))
    if not all(isinstance(sample, str) for sample in fields.get("warmup", ())):
        raise ModelLoadError(f"{MANIFEST_NAME}: warmup must be {_TYPE_WORDS['warmup']}")
    fields["warmup"] = tuple(fields.get("warmup", ()))
    for key in ("inputs", "outputs"):
        if key in fields:
            fields[key] = declared(fields[key], f"{MANIFEST_NAME}: {key}")
    if not DEVICE.fullmatch(fields.get("device", "cpu")):
        raise ModelLoadError(f"{MANIFEST_NAME}: device must be {_TYPE_WORDS['device']}")
    return Manifest(**fields)


def _number(key: str, value: object) -> float:
    """`value` as `key` may be; else a load error."""
    words, fits, kind = _NUMBERS[key]
    if not _is_number(value) or (kind is int and not _is_whole(value)) or not fits(value):
        raise ModelLoadError(f"{MANIFEST_NAME}: {key} must be {words}, at most {MOST_COUNT}")
    return kind(value)


def _size(value: str | int) -> int:
    try:
        return parse_size(str(value))
    except ConfigError as error:
        raise ModelLoadError(f"{MANIFEST_NAME}: memory: {error}") from None
