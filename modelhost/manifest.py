"""A model's own settings, from `modelhost.toml` inside its artifact.

The frontend reads it once the artifact is on disk: batch size and delay, the most workers the
model may use, pinning, a declared memory size and warm-up samples are scheduling decisions; the
handler name is passed to the worker. Every field is optional: an absent one means "the server's
setting". Unknown keys are refused, so a typo never silently does nothing.

    handler = "sklearn"            # a built-in handler, or a file in the artifact
    batch_size = 16
    max_batch_delay_ms = 2
    max_workers = 2
    pinned = true
    memory = "300MiB"              # trust this over the estimate from the artifact's size
    warmup = ["samples/0.json"]    # bodies that must succeed before the model counts as loaded
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelhost.config import parse_size
from modelhost.errors import ModelLoadError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

MANIFEST_NAME = "modelhost.toml"


@dataclass(frozen=True)
class Manifest:
    handler: str | None = None
    batch_size: int | None = None
    max_batch_delay_ms: float | None = None
    max_workers: int | None = None
    pinned: bool = False
    memory_bytes: int | None = None
    warmup: tuple[str, ...] = ()


NO_MANIFEST = Manifest()
_POSITIVE_INTS = ("batch_size", "max_workers")


def read_manifest(artifact: Path) -> Manifest:
    """The manifest of an unpacked artifact (its folder or a lone top folder), or the empty one."""
    path = find_manifest(artifact)
    if path is None:
        return NO_MANIFEST
    try:
        table = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ModelLoadError(f"{MANIFEST_NAME} is not valid TOML: {error}") from None
    return parse_manifest(table)


def find_manifest(artifact: Path) -> Path | None:
    if not artifact.is_dir():
        return None
    candidates = [artifact / MANIFEST_NAME, *artifact.glob(f"*/{MANIFEST_NAME}")]
    return next((path for path in candidates if path.is_file()), None)


def parse_manifest(table: dict[str, Any]) -> Manifest:
    unknown = set(table) - set(Manifest.__dataclass_fields__) - {"memory"}
    if unknown:
        allowed = ", ".join(sorted({*Manifest.__dataclass_fields__, "memory"} - {"memory_bytes"}))
        raise ModelLoadError(
            f"{MANIFEST_NAME} has unknown keys {sorted(unknown)}; allowed: {allowed}"
        )
    fields = dict(table)
    for key in _POSITIVE_INTS:
        if key in fields and (not isinstance(fields[key], int) or fields[key] < 1):
            raise ModelLoadError(f"{MANIFEST_NAME}: {key} must be a whole number of at least 1")
    delay = fields.get("max_batch_delay_ms", 0)
    if not isinstance(delay, (int, float)) or delay < 0:
        raise ModelLoadError(f"{MANIFEST_NAME}: max_batch_delay_ms must be a number of at least 0")
    if "memory" in fields:
        fields["memory_bytes"] = parse_size(str(fields.pop("memory")))
    fields["warmup"] = tuple(fields.get("warmup", ()))
    return Manifest(**fields)
