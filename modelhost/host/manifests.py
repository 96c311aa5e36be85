"""Each model's own settings (its manifest) and the memory to reserve for its next load."""

from __future__ import annotations

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


def estimate_footprint(artifact_bytes: int) -> int:
    """Memory to reserve for a model never loaded before, from the size of its artifact."""
    return int(artifact_bytes * ESTIMATE_FACTOR) + MIN_FOOTPRINT_BYTES


class Manifests:
    """What each model declared (read at each load) and what its last load measured."""

    def __init__(self, events: EventLog, pinned: frozenset[str], max_rows: int = 0) -> None:
        self.events = events
        self.pinned = pinned  # by the server's configuration
        self.max_rows = max_rows  # a request's rows, at most (the server's setting)
        self.manifests: dict[str, Manifest] = {}
        self.footprints: dict[str, int] = {}  # measured at each load, reused for the next
        self.peaks: dict[str, int] = {}  # the most a load needed while it ran (unpickling)
        self.pure: set[str] = set()  # models whose last load said their handler is pure

    def of(self, name: str) -> Manifest:
        return self.manifests.get(name, NO_MANIFEST)

    def is_pinned(self, name: str) -> bool:
        return name in self.pinned or self.of(name).pinned

    def retry_safe(self, name: str) -> bool:
        """Whether a request may run twice: a built-in handler, or a manifest that says so."""
        return name in self.pure or self.of(name).idempotent

    def read(self, name: str, artifact: Artifact) -> Manifest:
        try:
            manifest = read_manifest(artifact.path)
        except ModelLoadError as error:
            error = ModelLoadError(f"could not load model {name}: {error}")
            self.events.emit("failure", name, reason="manifest", detail={"error": str(error)})
            raise error from None
        self.manifests[name] = manifest
        return manifest

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
        if name not in self.footprints:
            return None
        return max(self.footprints[name], self.peaks.get(name, 0))

    def measured(self, name: str, loaded: Loaded) -> int:
        """Record what a load measured (footprint, peak, a pure handler); what the model is
        accounted at once loaded (never below its floor nor below what its manifest declares)."""
        footprint = max(MIN_FOOTPRINT_BYTES, loaded.footprint, self.of(name).memory_bytes or 0)
        self.footprints[name], self.peaks[name] = footprint, loaded.peak
        (self.pure.add if loaded.pure else self.pure.discard)(name)
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
        )


def fast_copy_detail(loaded: Loaded) -> dict[str, Any]:
    """A load event's word on its fast copy (cache.fast_copies): read, written, or none."""
    if loaded.fast_copy_read:
        return {"fast_copy": "read"}
    if loaded.fast_copy_written:
        return {"fast_copy": "written", "fast_copy_bytes": loaded.fast_copy_written}
    return {}
