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
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import add_serve_arg, markdown_table, median, parse_server_timing, write_results

from modelhost import testing
from modelhost.testing_stores import MotoServer

BUCKET, PREFIX = "bench", "models"
HEADER = ["scenario", "n", "median", "min", "max", "unit"]


def main() -> None:
    args = _parse_args()
    with tempfile.TemporaryDirectory(prefix="modelhost-remote-") as scratch_dir:
        scratch = Path(scratch_dir)
        artifact = testing.padded_logreg(scratch / "big.joblib", int(args.size_mib * 2**20))
        floors_ms = [_load_and_predict(artifact) for _ in range(args.runs)]
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
            run["remote"] = _post(http, server.url, name)
            assert http.delete(f"{server.url}/models/{name}").status_code == 200
            run["disk"] = _post(http, server.url, name)
            run["download"] = _download_event(http, server.url, name)
            runs.append(run)
    return runs


def _boto3_download(client: Any, name: str, dest: Path) -> float:
    started = time.perf_counter()
    client.download_file(BUCKET, f"{PREFIX}/{name}", str(dest))
    elapsed = time.perf_counter() - started
    dest.unlink()
    return elapsed


def _post(http: Any, url: str, name: str) -> dict[str, Any]:
    started = time.perf_counter()
    response = http.post(f"{url}/models/{name}/invoke", json=testing.iris_rows(1))
    wall_ms = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        raise RuntimeError(f"POST {name} answered {response.status_code}: {response.text}")
    timing = parse_server_timing(response.headers.get("server-timing"))
    return {"wall_ms": wall_ms, "cache": response.headers["x-modelhost-cache"], "timing": timing}


def _download_event(http: Any, url: str, name: str) -> dict[str, Any]:
    events = http.get(f"{url}/models/{name}").json()["events"]
    return next(e for e in events if e["kind"] == "download")


def _load_and_predict(path: Path) -> float:
    import joblib

    started = time.perf_counter()
    joblib.load(path).predict(testing.iris_rows(1))
    return (time.perf_counter() - started) * 1000


def _rows(runs: list[dict[str, Any]], size: int) -> list[list[Any]]:
    mib = size / 2**20
    series = {
        "boto3 download_file": ([mib / r["boto3_s"] for r in runs], "MiB/s"),
        "modelhost download (event)": (
            [mib / (r["download"]["duration_ms"] / 1000) for r in runs],
            "MiB/s",
        ),
        "first prediction, model in S3": ([r["remote"]["wall_ms"] for r in runs], "ms"),
        "  of which download": ([r["remote"]["timing"]["download"] for r in runs], "ms"),
        "  of which load": ([r["remote"]["timing"]["load"] for r in runs], "ms"),
        "first prediction, model on disk": ([r["disk"]["wall_ms"] for r in runs], "ms"),
        "joblib.load + predict in process": ([r["floor_ms"] for r in runs], "ms"),
    }
    return [
        [label, len(values), median(values), min(values), max(values), unit]
        for label, (values, unit) in series.items()
    ]


if __name__ == "__main__":
    main()
