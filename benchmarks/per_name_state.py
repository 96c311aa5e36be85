"""The frontend's memory per name seen: what its per-name structures hold after N distinct names.

Each name goes through what a miss puts it through in the frontend: a download and a load event
(with the details the server writes), its usage counters (Server-Timing parsed from a header),
its manifest read and what its load measured, its hashes in the admission sketch, the OIP
signature its load told (an iris classifier's, decoded as the worker's reply brings it) kept
after it unloads; and as many made-up names go through the missing-URL memory, as a scan of
names the store does not have. tracemalloc measures the bytes these structures hold
afterwards: the event histories (capped in bytes on their own) and the kept signatures apart
from the rest. No server, no workers: only the frontend's state.

    python benchmarks/per_name_state.py                        # 1,000 / 10,000 / 100,000
    python benchmarks/per_name_state.py --names 1000000        # a million: a minute or two
    python benchmarks/per_name_state.py --checkout /tmp/at-abc # a `git archive` of another commit
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tempfile
import tracemalloc
from pathlib import Path
from typing import Any

MiB = 2**20


def structures() -> dict[str, Any]:
    """The frontend's per-name structures, as the server builds them."""
    from modelhost.cache.admission import FrequencySketch
    from modelhost.cache.missing import MissingUrls
    from modelhost.host.manifests import Manifests
    from modelhost.observe.usage import ModelUsage
    from modelhost.records.events import EventLog

    events = EventLog()
    held = {
        "events": events,
        "manifests": Manifests(events, frozenset()),
        "usage": ModelUsage(),
        "missing": MissingUrls(),
        "sketch": FrequencySketch(),
    }
    try:
        from modelhost.host.signatures import Signatures
    except ImportError:  # a commit before signatures were kept
        return held
    return held | {"signatures": Signatures()}


def iris_signature() -> bytes:
    """An iris classifier's signature as a worker's Loaded reply carries it."""
    import msgspec

    from modelhost.workers.signatures import Signature, TensorSpec

    inputs = (TensorSpec("input-0", "FP64", (-1, 4)),)
    outputs = (TensorSpec("predict", "INT64", (-1,)), TensorSpec("predict_proba", "FP64", (-1, 3)))
    return msgspec.msgpack.encode(Signature(inputs, outputs))


def pass_names(held: dict[str, Any], count: int, folder: Path) -> None:
    """`count` fresh names through every structure, as misses put them."""
    from modelhost.cache.disk import Artifact
    from modelhost.errors import ModelNotFound
    from modelhost.observe.exchange import Exchange, parse_server_timing
    from modelhost.workers.messages import Loaded

    artifact = Artifact("m", folder, 300_000)
    signature = iris_signature()
    for i in range(count):
        name = f"tenant-{i:07d}/churn.tar.gz"
        held["events"].emit("download", name, bytes=300_000 + i, duration_ms=3.2, reason="miss")
        detail = {"loader_ms": 1.5, "reserved_bytes": 817_232 + i, "fast_copy": "read"}
        held["events"].emit(
            "load", name, bytes=266_240 + i, duration_ms=6.1, worker=1, detail=detail
        )
        timing = parse_server_timing(
            "queue;dur=0.021, download;dur=3.2, load;dur=6.1, infer;dur=0.4"
        )
        held["usage"].record(
            Exchange(
                time=0.0,
                method="POST",
                route="/invocations",
                status=200,
                duration_s=0.01,
                bytes_in=40,
                bytes_out=30,
                invocation=True,
                model=name,
                cache="remote",
                timings_ms=timing,
            )
        )
        held["manifests"].read(name, artifact)
        held["manifests"].measured(
            name, Loaded(footprint=266_240 + i, load_ms=6.1, batches=True, peak=600_000, pure=True)
        )
        held["sketch"].record(name)
        if "signatures" in held:
            keep_signature(held["signatures"], name, signature)
        url = f"s3://bucket/models/nonexistent-{i:07d}.joblib"
        held["missing"].remember(url, ModelNotFound(f"model not found: no object at {url}"))


def keep_signature(signatures: Any, name: str, encoded: bytes) -> None:
    """What a load and an unload leave: the signature decoded from the reply, kept."""
    import msgspec

    from modelhost.workers.signatures import Signature

    signatures.loaded_now(name, msgspec.msgpack.decode(encoded, type=Signature))
    signatures.left(name)


def measure(count: int) -> dict[str, Any]:
    """Bytes the structures hold after `count` names: the histories apart from the rest."""
    with tempfile.TemporaryDirectory() as folder:
        pass_names(structures(), 1, Path(folder))  # imports and caches made once, not per name
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        held = structures()
        with tempfile.TemporaryDirectory() as folder:
            pass_names(held, count, Path(folder))
        gc.collect()
        total = tracemalloc.get_traced_memory()[0] - before
        histories = history_bytes(held["events"])
        kept = len(held["signatures"].kept) if "signatures" in held else 0
        signatures = dropped_bytes(held["signatures"].kept) if "signatures" in held else 0
    finally:
        tracemalloc.stop()
    rest = total - histories - signatures
    return {
        "names": count,
        "total_bytes": total,
        "history_bytes": histories,
        "signature_bytes": signatures,
        "kept_signatures": kept,
        "rest_bytes": rest,
        "rest_bytes_per_name": round(rest / count, 1),
    }


def dropped_bytes(kept: Any) -> int:
    """What `kept` holds, as tracemalloc sees it drop."""
    before = tracemalloc.get_traced_memory()[0]
    kept.clear()
    gc.collect()
    return before - tracemalloc.get_traced_memory()[0]


def history_bytes(events: Any) -> int:
    """What the event log holds (histories and the recent ring), as tracemalloc sees it drop."""
    before = tracemalloc.get_traced_memory()[0]
    events._by_model.clear()
    if hasattr(events, "_recent"):
        events._recent.clear()
    else:  # before the histories were capped in bytes
        events.recent.clear()
    gc.collect()
    return before - tracemalloc.get_traced_memory()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", type=int, nargs="+", default=[1000, 10_000, 100_000])
    parser.add_argument("--checkout", help="measure the modelhost package of this folder")
    arguments = parser.parse_args()
    if arguments.checkout:
        sys.path.insert(0, arguments.checkout)
    rows = [measure(count) for count in arguments.names]
    print("| names | event log MiB | kept signatures MiB | rest MiB | rest B per name |")
    print("|---|---|---|---|---|")
    for row in rows:
        histories, rest = row["history_bytes"] / MiB, row["rest_bytes"] / MiB
        kept = f"{row['signature_bytes'] / MiB:.1f} ({row['kept_signatures']:,})"
        per_name = row["rest_bytes_per_name"]
        print(f"| {row['names']:,} | {histories:.1f} | {kept} | {rest:.1f} | {per_name} |")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
