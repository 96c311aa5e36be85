"""Each model's manifest and the memory to reserve for its next load.

A server may see a million names, so manifests are kept only while in memory and measurements
are packed one int a name in a capped LRU.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from modelhost.cache.disk import Artifact
from modelhost.cache.fast_copies import Offer
from modelhost.errors import ModelLoadError
from modelhost.manifest import NO_MANIFEST, Manifest, manifest_root, read_manifest
from modelhost.records.events import EventLog
from modelhost.workers.messages import Load, Loaded

MIN_FOOTPRINT_BYTES = 64 * 1024
# covers unpickling's peak (docs/decisions.md, "A load's footprint is what it allocated")
ESTIMATE_FACTOR = 2.5
MAX_MEASURED = 32_768  # far more than a budget holds loaded
MEASURED_BYTES = 256  # an entry, as tracemalloc measures it
MAX_MANIFESTS = 1024
PEAK_BITS = 47  # up to 128 TiB, between the footprint and the purity bit


def estimate_footprint(artifact_bytes: int) -> int:
    """Memory to reserve for a model never loaded before."""
    return int(artifact_bytes * ESTIMATE_FACTOR) + MIN_FOOTPRINT_BYTES


ARTIFACT_FIRST = ("response_timeout_s", "load_timeout_s")  # as TorchServe orders them


class Measurements:
    """Each model's last footprint, peak and purity, packed in one int, LRU-capped."""

    def __init__(self, max_models: int = MAX_MEASURED) -> None:
        self.max_models = max_models
        self._packed: OrderedDict[str, int] = OrderedDict()

    def __len__(self) -> int:
        return len(self._packed)

    def record(self, name: str, footprint: int, peak: int, pure: bool) -> None:
        self._packed.pop(name, None)
        peak = min(peak, (1 << PEAK_BITS) - 1)
        self._packed[name] = footprint << (PEAK_BITS + 1) | peak << 1 | pure
        if len(self._packed) > self.max_models:
            self._packed.popitem(last=False)

    def _used(self, name: str) -> int | None:
        packed = self._packed.get(name)
        if packed is not None:
            self._packed.move_to_end(name)
        return packed

    def get(self, name: str) -> int | None:
        packed = self._used(name)
        return None if packed is None else packed >> (PEAK_BITS + 1)

    def peak(self, name: str) -> int:
        packed = self._used(name)
        return 0 if packed is None else packed >> 1 & ((1 << PEAK_BITS) - 1)

    def pure(self, name: str) -> bool:
        packed = self._used(name)
        return bool(packed and packed & 1)


class Manifests:
    def __init__(
        self,
        events: EventLog,
        pinned: frozenset[str],
        max_rows: int = 0,
        in_memory: Callable[[str], bool] = lambda name: True,
        batch_size: Callable[[int | None], int] = lambda declared: declared or 0,
    ) -> None:
        self.events = events
        self.pinned = pinned
        self.max_rows = max_rows
        self.in_memory = in_memory  # its manifest must stay
        self.batch_size = batch_size  # a batching handler's, from its manifest's
        self.manifests: dict[str, Manifest] = {}  # only those that say something
        self.own_idle_s: dict[str, float] = {}  # of those, each idle_unload_s set
        self.max_manifests = MAX_MANIFESTS
        self._sweep_at = MAX_MANIFESTS
        self.footprints = Measurements()
        # set by a TorchServe registration, over the artifact's manifest
        self._given: dict[str, dict[str, Any]] = {}

    def of(self, name: str) -> Manifest:
        return self.manifests.get(name, NO_MANIFEST)

    def give(self, name: str, fields: Mapping[str, Any]) -> None:
        if fields:
            self._given[name] = dict(fields)
        else:
            self._given.pop(name, None)

    def declared(self, name: str) -> Manifest:
        """`name`'s manifest as known before it loads."""
        return self._with_given(name, self.of(name))

    def _with_given(self, name: str, manifest: Manifest) -> Manifest:
        """The registration's fields over the artifact's, but for the timeouts the artifact
        sets: TorchServe's model-config.yaml wins over its registration's there."""
        given = self._given.get(name)
        if not given:
            return manifest
        kept = {
            f: v
            for f, v in given.items()
            if f not in ARTIFACT_FIRST or getattr(manifest, f) is None
        }
        return dataclasses.replace(manifest, **kept)

    def is_pinned(self, name: str) -> bool:
        return name in self.pinned or self.of(name).pinned

    def device_of(self, name: str) -> str | None:
        """The device its manifest pins it to ("cpu" included); None: any with room."""
        return self.of(name).device

    def retry_safe(self, name: str) -> bool:
        """Whether a request may run twice."""
        return self.footprints.pure(name) or self.of(name).idempotent

    def read(self, name: str, artifact: Artifact) -> Manifest:
        try:
            manifest = self._with_given(name, read_manifest(artifact.path))
        except ModelLoadError as error:
            error = ModelLoadError(f"could not load model {name}: {error}")
            self.events.emit("failure", name, reason="manifest", detail={"error": str(error)})
            raise error from None
        self._drop(name)
        if manifest != NO_MANIFEST:
            self.manifests[name] = manifest
            if manifest.idle_unload_s is not None:
                self.own_idle_s[name] = manifest.idle_unload_s
            self._sweep(keep=name)
        return manifest

    def _drop(self, name: str) -> None:
        self.manifests.pop(name, None)
        self.own_idle_s.pop(name, None)

    def _sweep(self, keep: str) -> None:
        """Drop the manifests of models out of memory, at O(1) a read amortised."""
        if len(self.manifests) <= self._sweep_at:
            return
        for name in [n for n in self.manifests if n != keep and not self.in_memory(n)]:
            self._drop(name)
        self._sweep_at = max(self.max_manifests, 2 * len(self.manifests))

    def reservation(self, name: str, artifact: Artifact) -> int:
        """Bytes to reserve while loading: declared, else last measured, else estimated."""
        declared = self.of(name).memory_bytes
        if declared is not None:
            return declared
        known = self.known_reservation(name)
        return estimate_footprint(artifact.bytes) if known is None else known

    def known_reservation(self, name: str) -> int | None:
        footprint = self.footprints.get(name)
        if footprint is None:
            return None
        return max(footprint, self.footprints.peak(name))

    def measured(self, name: str, loaded: Loaded) -> int:
        """Record what a load measured; return the bytes the model is accounted at."""
        footprint = max(MIN_FOOTPRINT_BYTES, loaded.footprint, self.of(name).memory_bytes or 0)
        self.footprints.record(name, footprint, loaded.peak, loaded.pure)
        return footprint

    def plain(self, name: str) -> bool:
        """Whether a fast copy may stand in (no handler or model file chosen)."""
        manifest = self.of(name)
        return not (manifest.handler or manifest.model_file)

    def load_request(self, name: str, artifact: Artifact, fast_copy: Offer | None = None) -> Load:

        manifest, path = self.of(name), str(artifact.path)
        says = manifest.handler or manifest.model_file or manifest.warmup
        root = str(manifest_root(artifact.path)) if says else None
        return Load(
            model=name,
            path=path,
            root=root,
            handler=manifest.handler,
            model_file=manifest.model_file,
            warmup=manifest.warmup,
            max_rows=self.max_rows,
            max_batch_size=self.batch_size(manifest.batch_size),
            fast_copy=str(fast_copy.path) if fast_copy else "",
            fast_copy_room=fast_copy.room if fast_copy else 0,
            threads=manifest.threads or 0,
            cpu=manifest.device == "cpu",
        )


def load_event(
    loaded: Loaded, worker_id: int, reason: str, loader_ms: float, reserved: int
) -> dict[str, Any]:

    return {
        "bytes": max(MIN_FOOTPRINT_BYTES, loaded.footprint),
        "duration_ms": round(loaded.load_ms, 2),
        "worker": worker_id,
        "reason": reason,
        "detail": {
            "loader_ms": round(loader_ms, 2),
            "reserved_bytes": reserved,
            **fast_copy_detail(loaded),
        },
    }


def fast_copy_detail(loaded: Loaded) -> dict[str, Any]:

    if loaded.fast_copy_read:
        return {"fast_copy": "read"}
    if loaded.fast_copy_written:
        return {"fast_copy": "written", "fast_copy_bytes": loaded.fast_copy_written}
    return {}
