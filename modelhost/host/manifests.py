"""Each model's own settings (its manifest) and the memory to reserve for its next load.

A server may see a million names: a manifest is kept only while its model is in memory (it is
read again at each load), and what loads measured is packed one int a name in a capped LRU.
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
# before a model's first load, reserve for unpickling's transient peak, not only what stays:
# a digits forest's peaks at 2.1x its file (its footprint is 1.0x), so 2x fell short
ESTIMATE_FACTOR = 2.5
# far more than a budget holds loaded; an older model's next load reserves the estimate instead
MAX_MEASURED = 32_768
MEASURED_BYTES = 256  # an entry, as tracemalloc measures it: name, LRU link, packed int
MAX_MANIFESTS = 1024  # kept before those of models out of memory are dropped
PEAK_BITS = 47  # a peak of up to 128 TiB, below a footprint and above the purity bit


def estimate_footprint(artifact_bytes: int) -> int:
    """Memory to reserve for a model never loaded before, from the size of its artifact."""
    return int(artifact_bytes * ESTIMATE_FACTOR) + MIN_FOOTPRINT_BYTES


class Measurements:
    """What the last load of each model measured (footprint, peak, a pure handler), packed in one
    int a name, for the most recently measured or used `max_models`."""

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
        """The packed record, now the most recently used; None if not kept."""
        packed = self._packed.get(name)
        if packed is not None:
            self._packed.move_to_end(name)
        return packed

    def get(self, name: str) -> int | None:
        """The footprint its last load measured."""
        packed = self._used(name)
        return None if packed is None else packed >> (PEAK_BITS + 1)

    def peak(self, name: str) -> int:
        packed = self._used(name)
        return 0 if packed is None else packed >> 1 & ((1 << PEAK_BITS) - 1)

    def pure(self, name: str) -> bool:
        packed = self._used(name)
        return bool(packed and packed & 1)


class Manifests:
    """What each model declared (read at each load) and what its last load measured."""

    def __init__(
        self,
        events: EventLog,
        pinned: frozenset[str],
        max_rows: int = 0,
        in_memory: Callable[[str], bool] = lambda name: True,
    ) -> None:
        self.events = events
        self.pinned = pinned  # by the server's configuration
        self.max_rows = max_rows  # a request's rows, at most (the server's setting)
        self.in_memory = in_memory  # loading or loaded: its manifest must stay
        self.manifests: dict[str, Manifest] = {}  # only those that say something
        self.max_manifests = MAX_MANIFESTS
        self._sweep_at = MAX_MANIFESTS
        self.footprints = Measurements()  # measured at each load, reused for the next
        # fields a registration set (TorchServe's POST /models), over the artifact's manifest
        self._given: dict[str, dict[str, Any]] = {}

    def of(self, name: str) -> Manifest:
        return self.manifests.get(name, NO_MANIFEST)

    def give(self, name: str, fields: Mapping[str, Any]) -> None:
        """Fields `name`'s loads take over its artifact's manifest (none: forget them)."""
        if fields:
            self._given[name] = dict(fields)
        else:
            self._given.pop(name, None)

    def declared(self, name: str) -> Manifest:
        """What is known of `name`'s manifest before it loads: the last read, and the fields
        a registration gave."""
        return self._with_given(name, self.of(name))

    def _with_given(self, name: str, manifest: Manifest) -> Manifest:
        given = self._given.get(name)
        return dataclasses.replace(manifest, **given) if given else manifest

    def is_pinned(self, name: str) -> bool:
        return name in self.pinned or self.of(name).pinned

    def retry_safe(self, name: str) -> bool:
        """Whether a request may run twice: a built-in handler, or a manifest that says so."""
        return self.footprints.pure(name) or self.of(name).idempotent

    def read(self, name: str, artifact: Artifact) -> Manifest:
        try:
            manifest = self._with_given(name, read_manifest(artifact.path))
        except ModelLoadError as error:
            error = ModelLoadError(f"could not load model {name}: {error}")
            self.events.emit("failure", name, reason="manifest", detail={"error": str(error)})
            raise error from None
        self.manifests.pop(name, None)
        if manifest != NO_MANIFEST:
            self.manifests[name] = manifest
            self._sweep(keep=name)
        return manifest

    def _sweep(self, keep: str) -> None:
        """Past `_sweep_at`, drop the manifests of models out of memory; the next sweep comes
        when as many again were read, so sweeping costs O(1) a read."""
        if len(self.manifests) <= self._sweep_at:
            return
        for name in [n for n in self.manifests if n != keep and not self.in_memory(n)]:
            del self.manifests[name]
        self._sweep_at = max(self.max_manifests, 2 * len(self.manifests))

    def reservation(self, name: str, artifact: Artifact) -> int:
        """Bytes to reserve while loading: the declared size, else the most the last load
        needed while it ran (its footprint, or more while unpickling), else the estimate."""
        declared = self.of(name).memory_bytes
        if declared is not None:
            return declared
        known = self.known_reservation(name)
        return estimate_footprint(artifact.bytes) if known is None else known

    def known_reservation(self, name: str) -> int | None:
        """What a load of `name` reserves once a load of it has been measured."""
        footprint = self.footprints.get(name)
        if footprint is None:
            return None
        return max(footprint, self.footprints.peak(name))

    def measured(self, name: str, loaded: Loaded) -> int:
        """Record what a load measured (footprint, peak, a pure handler); what the model is
        accounted at once loaded (never below its floor nor below what its manifest declares)."""
        footprint = max(MIN_FOOTPRINT_BYTES, loaded.footprint, self.of(name).memory_bytes or 0)
        self.footprints.record(name, footprint, loaded.peak, loaded.pure)
        return footprint

    def plain(self, name: str) -> bool:
        """Its manifest chooses neither handler nor model file: a fast copy may stand in."""
        manifest = self.of(name)
        return not (manifest.handler or manifest.model_file)

    def load_request(self, name: str, artifact: Artifact, fast_copy: Offer | None = None) -> Load:
        """The worker's load request: the artifact, what the manifest tells the worker, and the
        fast copy to read or write."""
        manifest, path = self.of(name), str(artifact.path)
        says = manifest.handler or manifest.model_file or manifest.warmup
        root = str(manifest_root(artifact.path)) if says else None
        return Load(
            name,
            path,
            root,
            manifest.handler,
            manifest.model_file,
            manifest.warmup,
            self.max_rows,
            str(fast_copy.path) if fast_copy else "",
            fast_copy.room if fast_copy else 0,
            manifest.threads or 0,
        )


def load_event(
    loaded: Loaded, worker_id: int, reason: str, loader_ms: float, reserved: int
) -> dict[str, Any]:
    """A load event's fields: the worker's loader, taken for this load (room made, victims
    gone, the load sent), and the memory the budget held for the load while it ran."""
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
    """A load event's word on its fast copy (cache.fast_copies): read, written, or none."""
    if loaded.fast_copy_read:
        return {"fast_copy": "read"}
    if loaded.fast_copy_written:
        return {"fast_copy": "written", "fast_copy_bytes": loaded.fast_copy_written}
    return {}
