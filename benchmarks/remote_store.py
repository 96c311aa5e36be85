"""Remote store: download throughput of a ~200 MB artifact from a local S3 server (moto in server
mode), and time to first prediction from S3 against the same model already on disk.

Each run, interleaved so drift hits all alike:
(a) boto3 `download_file` (s3transfer defaults) of the object into a temp file, in this process:
    what a plain client gets from the same server;
(b) modelhost, first POST of a model not seen before (a miss from S3): wall time, and the MB/s of
    its download event;
(c) DELETE /models/{m}, then POST again (a miss from the disk cache);
(d) `joblib.load` + predict of the same file, in this process before any download (a process
    that has downloaded 200 MB through boto3 loads it several times slower): the floor.

    python benchmarks/remote_store.py [--size-mib 200] [--runs 3] [--serve-arg=--workers=1 ...]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import (
    REPO,
    add_serve_arg,
    load_and_predict_ms,
    markdown_table,
    median,
    post_invoke,
    write_results,
)

from modelhost import testing

sys.path.insert(0, str(REPO / "tests"))  # the store servers live beside the tests that use them
from helpers.stores import MotoServer  # noqa: E402

BUCKET, PREFIX = "bench", "models"
HEADER = ["scenario", "n", "median", "min", "max", "unit"]


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-remote-") as scratch_dir:
        scratch = Path(scratch_dir)
        artifact = testing.padded_logreg(scratch / "big.joblib", int(args.size_mib * 2**20))
        floors_ms = [load_and_predict_ms(artifact, testing.iris_rows(1)) for _ in range(args.runs)]
        with MotoServer() as moto:
            client = moto.client()
            client.create_bucket(Bucket=BUCKET)
            names = [f"big-{run}.joblib" for run in range(args.runs)]
            for name in names:
                client.upload_file(str(artifact), BUCKET, f"{PREFIX}/{name}")
            runs = _measure(moto, client, scratch, names, args.serve_arg)
        for run, floor_ms in zip(runs, floors_ms, strict=True):
            run["floor_ms"] = floor_ms
        size = artifact.stat().st_size
    rows = _rows(runs, size)
    table = markdown_table(HEADER, rows)
    path = write_results(
        "remote_store", {"settings": vars(args), "bytes": size, "runs": runs}, table
    )
    print(f"artifact: {size / 2**20:.1f} MiB\n\n{table}\n\nraw results: {path}")


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=float, default=200.0)
    parser.add_argument("--runs", type=int, default=3)
    add_serve_arg(parser)
    return parser.parse_args()


def _measure(
    moto: MotoServer, client: Any, scratch: Path, names: list[str], extra: list[str]
) -> list[dict[str, Any]]:
    import httpx

    serve_args = testing.serve_args(f"s3://{BUCKET}/{PREFIX}", scratch / "cache", workers=1)
    env = {**os.environ, **moto.client_env()}
    runs = []
    with (
        testing.RunningServer([*serve_args, *extra], scratch, env=env) as server,
        httpx.Client(timeout=600) as http,
    ):
        for name in names:
            run = {"boto3_s": _boto3_download(client, name, scratch / "boto3.bin")}
            run["remote"] = post_invoke(http, server.url, name, testing.iris_rows(1))
            assert http.delete(f"{server.url}/models/{name}").status_code == 200
            run["disk"] = post_invoke(http, server.url, name, testing.iris_rows(1))
            run["download"] = _download_event(http, server.url, name)
            runs.append(run)
    return runs


def _boto3_download(client: Any, name: str, dest: Path) -> float:
    started = time.perf_counter()
    client.download_file(BUCKET, f"{PREFIX}/{name}", str(dest))
    elapsed = time.perf_counter() - started
    dest.unlink()
    return elapsed


def _download_event(http: Any, url: str, name: str) -> dict[str, Any]:
    events = http.get(f"{url}/models/{name}").json()["events"]
    return next(e for e in events if e["kind"] == "download")


def _rows(runs: list[dict[str, Any]], size: int) -> list[list[Any]]:
    mib = size / 2**20
    series = {
        "boto3 download_file": ([mib / r["boto3_s"] for r in runs], "MiB/s"),
        "modelhost download (event)": (
            [mib / (r["download"]["duration_ms"] / 1000) for r in runs],
            "MiB/s",
        ),
        "first prediction, model in S3": ([r["remote"]["wall_ms"] for r in runs], "ms"),
        "  of which download": ([r["remote"]["server_timing_ms"]["download"] for r in runs], "ms"),
        "  of which load": ([r["remote"]["server_timing_ms"]["load"] for r in runs], "ms"),
        "first prediction, model on disk": ([r["disk"]["wall_ms"] for r in runs], "ms"),
        "joblib.load + predict in process": ([r["floor_ms"] for r in runs], "ms"),
    }
    return [
        [label, len(values), median(values), min(values), max(values), unit]
        for label, (values, unit) in series.items()
    ]


if __name__ == "__main__":
    main()
