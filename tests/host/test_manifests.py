"""What the host keeps per model between loads is small and capped, whatever the names seen."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from modelhost.cache.disk import Artifact
from modelhost.host.manifests import (
    MAX_MEASURED,
    MEASURED_BYTES,
    MIN_FOOTPRINT_BYTES,
    Manifests,
)
from modelhost.manifest import NO_MANIFEST
from modelhost.records.events import EventLog
from modelhost.workers.messages import Loaded

MiB = 2**20


def measure(manifests: Manifests, name: str, footprint: int, pure: bool = True) -> None:
    manifests.measured(
        name, Loaded(footprint=footprint, load_ms=1.0, batches=True, peak=2 * footprint, pure=pure)
    )


def test_measurements_are_kept_for_at_most_the_cap() -> None:
    manifests = Manifests(EventLog(), frozenset())
    for i in range(MAX_MEASURED + 1000):
        measure(manifests, f"m{i}", MiB + i)
    last = MAX_MEASURED + 999
    assert manifests.known_reservation(f"m{last}") == 2 * (MiB + last)
    assert manifests.retry_safe(f"m{last}")
    assert manifests.known_reservation("m0") is None
    assert not manifests.retry_safe("m0")
    assert len(manifests.footprints) == MAX_MEASURED


def test_model_in_use_keeps_its_measurements() -> None:
    """A model asked about at each request keeps its measurements while new names pass."""
    manifests = Manifests(EventLog(), frozenset())
    measure(manifests, "hot", 3 * MiB)
    for i in range(MAX_MEASURED + 10):
        measure(manifests, f"m{i}", MiB, pure=False)
        if i % 1000 == 0:
            assert manifests.retry_safe("hot")  # asked at each request
    assert manifests.footprints.get("hot") == 3 * MiB


def test_a_measurement_reads_back_as_measured() -> None:
    manifests = Manifests(EventLog(), frozenset())
    manifests.measured(
        "m", Loaded(footprint=1000, load_ms=1.0, batches=True, peak=5 * MiB, pure=False)
    )
    assert manifests.footprints.get("m") == MIN_FOOTPRINT_BYTES
    assert manifests.known_reservation("m") == 5 * MiB
    assert not manifests.retry_safe("m")
    measure(manifests, "m", 7 * MiB, pure=True)
    assert manifests.known_reservation("m") == 14 * MiB and manifests.retry_safe("m")


def test_measurements_memory_is_bounded() -> None:
    """Measurements of 100,000 models stay within the cap's bytes."""
    manifests = Manifests(EventLog(), frozenset())
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(100_000):
            measure(manifests, f"tenant-{i}/model.tar.gz", MiB + i)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held <= MAX_MEASURED * MEASURED_BYTES


def test_manifest_kept_only_while_in_memory(tmp_path: Path) -> None:
    """A manifest is kept only while its model is in memory or loading."""
    (tmp_path / "modelhost.toml").write_text("batch_size = 4\n", encoding="utf-8")
    artifact = Artifact("m", tmp_path, 100)
    in_memory = {"m0"}
    manifests = Manifests(EventLog(), frozenset(), in_memory=in_memory.__contains__)
    for i in range(5000):
        manifests.read(f"m{i}", artifact)
    assert manifests.of("m0").batch_size == 4  # loaded: its manifest stays
    assert manifests.of("m4999").batch_size == 4  # just read, for the load under way
    assert manifests.of("m1") is NO_MANIFEST
    assert len(manifests.manifests) <= 2 * manifests.max_manifests


def test_a_model_without_a_manifest_costs_no_entry(tmp_path: Path) -> None:
    manifests = Manifests(EventLog(), frozenset())
    manifests.read("plain", Artifact("plain", tmp_path, 100))
    assert manifests.manifests == {}
