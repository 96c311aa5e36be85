"""The trace `simulate` replays: each invocation's model, with its size and its reload cost."""

from __future__ import annotations

import gzip
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from modelhost.errors import ConfigError
from modelhost.units import parse_size

DEFAULT_RELOAD_MS = 1.0


@dataclass(frozen=True)
class Trace:
    models: list[str]  # one per request, in time order
    sizes: dict[str, int]
    reload_ms: dict[str, float]  # median download + load of the log's misses
    times: list[float] = field(default_factory=list)  # empty: unknown
    tenants: list[str] = field(default_factory=list)  # the log's tenant field, "" where none

    def size_of(self, index: int) -> int:
        return self.sizes[self.models[index]]

    @property
    def distinct_bytes(self) -> int:
        return sum(self.sizes[m] for m in set(self.models))


def read_access_log(
    path: Path, sizes: Mapping[str, int] | None = None, default_size: int | None = None
) -> Trace:
    """Invocations that reached a model, in order, sized by the log, `sizes` or `default_size`."""
    models: list[str] = []
    times: list[float] = []
    tenants: list[str] = []
    found = dict(sizes or {})
    costs: dict[str, list[float]] = {}
    for number, line in enumerate(log_lines(path), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            raise ValueError(f"{path}:{number}: not a JSON line") from None
        if not record.get("model") or not record.get("cache"):
            continue
        model = record["model"]
        models.append(model)
        times.append(float(record.get("time", len(times))))
        tenants.append(str(record.get("tenant", "")))
        if "model_bytes" in record:
            found[model] = int(record["model_bytes"])
        if record["cache"] != "hit":
            costs.setdefault(model, []).append(
                float(record.get("download_ms", 0.0)) + float(record.get("load_ms", 0.0))
            )
    sizes_found = _sizes_for(models, found, default_size, path)
    return make_trace(models, sizes_found, costs, times, tenants)


def make_trace(
    models: list[str],
    sizes: Mapping[str, int],
    costs: Mapping[str, list[float]] | None = None,
    times: list[float] | None = None,
    tenants: list[str] | None = None,
) -> Trace:
    costs = costs or {}
    reload_ms = {
        m: statistics.median(costs[m]) if costs.get(m) else DEFAULT_RELOAD_MS for m in set(models)
    }
    sized = {m: int(sizes[m]) for m in set(models)}
    return Trace(models, sized, reload_ms, list(times or []), list(tenants or []))


def _sizes_for(
    models: list[str], found: dict[str, int], default_size: int | None, path: Path
) -> dict[str, int]:
    missing = sorted(set(models) - set(found))
    if missing and default_size is None:
        shown = ", ".join(missing[:5]) + (" …" if len(missing) > 5 else "")
        raise ValueError(
            f"{len(missing)} models in {path} have no size ({shown}), as no request in it "
            "loaded them: give --sizes FILE (JSON {model: bytes}) or --default-size SIZE"
        )
    return {m: found.get(m, default_size or 0) for m in set(models)}


def read_sizes(path: Path) -> dict[str, int]:
    """--sizes: JSON {model: size}, each in bytes or as the server's flags write it (64MiB)."""
    try:
        sizes = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(sizes, dict):
        raise ValueError(
            f'{path}: write a JSON object {{model: size}}, e.g. {{"t/a.joblib": "64MiB"}}'
        )
    return {model: _size(path, model, value) for model, value in sizes.items()}


def _size(path: Path, model: str, value: object) -> int:
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ConfigError(f"{value!r} is not a size")
        return parse_size(str(value))
    except ConfigError as exc:
        raise ValueError(f"{path}: {model}: {exc}") from None


def log_lines(path: Path) -> list[str]:
    """A log's lines, gunzipped if it was rotated and compressed."""
    raw = Path(path).read_bytes()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    written, _, last = raw.rpartition(b"\n")
    if written and last and not _parses(last):  # the server is still writing it
        raw = written
    try:
        return raw.decode().splitlines()
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a JSON-lines access log (nor a gzipped one)") from None


def _parses(line: bytes) -> bool:
    try:
        json.loads(line)
    except ValueError:
        return False
    return True
