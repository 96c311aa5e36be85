"""The iris hot path over the Open Inference Protocol: gRPC (ModelInfer with raw FP32 contents,
as tritonclient.grpc sends it) against REST (POST /v2/models/{model}/infer, JSON) and against the
in-process floor (benchmarks/floor_app.py), at each concurrency.

The server is pinned to one core (modelhost with `--workers 1`: frontend and worker share it)
and the load generator to the other. Both generators are C programs that cost their core little:
wrk for HTTP/1.1, h2load (nghttp2) for gRPC, which posts a length-prefixed ModelInferRequest as
gRPC frames it; each user has a connection of its own, as wrk's do. A warm-up run is discarded
before each measured one. Prints a markdown table and writes benchmarks/results/grpc_path-<date>
.json (and .md).

    python benchmarks/grpc_path.py                        # C in 1 16, 15 s runs, 5 s warm-up
    python benchmarks/grpc_path.py --concurrency 1 --duration 3 --warmup 1
    python benchmarks/grpc_path.py --concurrency 1 --empty  # also ServerLive and GET /ping
    python benchmarks/grpc_path.py --concurrency 1 16 --rounds 5 --duration 3 --warmup 1

`--empty` adds an empty call of each protocol, so an inference's part can be told from the
protocol's. `--rounds N` runs gRPC and REST in turn N times on the same server and adds a table of
each round's gRPC / REST throughput and p50 difference, and their medians: on a shared machine,
a neighbour's burst then falls on one round, not on one protocol.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _common import add_serve_arg, markdown_table, write_results
from hot_path import _start, _table_row, ensure_wrk, wrk

from modelhost import testing

MODEL = "iris.joblib"
ROW = [5.1, 3.5, 1.4, 0.2]
MODEL_INFER = "/inference.GRPCInferenceService/ModelInfer"
HEADER = ["target", "concurrency", "requests/s", "p50 ms", "p99 ms", "errors"]


def main() -> None:
    args = _parse_args()
    ensure_wrk()
    ensure_h2load()
    with tempfile.TemporaryDirectory(prefix="modelhost-grpc-path-") as scratch:
        scratch_path = Path(scratch)
        store = scratch_path / "store"
        testing.iris_logreg(store / MODEL)
        request = scratch_path / "model_infer.bin"
        request.write_bytes(grpc_frame(model_infer()))
        grpc_port = testing.free_port()
        args.serve_arg = ["--grpc-port", str(grpc_port), *args.serve_arg]
        runs = []
        with _start("modelhost", store, scratch_path / "modelhost", args) as modelhost:
            check_grpc(f"127.0.0.1:{grpc_port}", request.read_bytes())
            address = f"http://127.0.0.1:{grpc_port}{MODEL_INFER}"
            rest = f"{modelhost.url}/v2/models/{MODEL}/infer"
            for _ in range(args.rounds):
                runs += _runs(args, "OIP gRPC", lambda c, d: h2load(address, request, c, d, args))
                runs += _runs(args, "OIP REST", lambda c, d: _wrk(rest, oip_json(), c, d, args))
            if args.empty:
                runs += _empty_calls(args, f"127.0.0.1:{grpc_port}", modelhost.url, scratch_path)
        with _start("floor", store, scratch_path / "floor", args) as floor:
            row = json.dumps(ROW).encode()
            runs += _runs(args, "floor", lambda c, d: _wrk(floor.url + "/", row, c, d, args))
    table = markdown_table(HEADER, [_table_row(run, "target") for run in runs])
    if args.rounds > 1:
        table += "\n\n" + _rounds_table(runs, args.concurrency)
    path = write_results("grpc_path", {"settings": vars(args), "runs": runs}, table)
    print(table)
    print(f"\nraw results: {path}")


def _empty_calls(
    args: argparse.Namespace, grpc_address: str, http_url: str, scratch: Path
) -> list[dict[str, Any]]:
    """gRPC's ServerLive and REST's GET /ping: each protocol's cost alone."""
    from modelhost.rpc.messages import message

    live = scratch / "server_live.bin"
    live.write_bytes(grpc_frame(message("inference.ServerLiveRequest")().SerializeToString()))
    url = f"http://{grpc_address}/inference.GRPCInferenceService/ServerLive"
    runs = _runs(args, "gRPC ServerLive", lambda c, d: h2load(url, live, c, d, args))
    os.environ["WRK_METHOD"] = "GET"
    try:
        return runs + _runs(
            args, "REST GET /ping", lambda c, d: _wrk(f"{http_url}/ping", b"", c, d, args)
        )
    finally:
        del os.environ["WRK_METHOD"]


def _rounds_table(runs: list[dict[str, Any]], concurrencies: list[int]) -> str:
    """Each round's gRPC / REST requests a second and gRPC's p50 less REST's, at each
    concurrency, and the medians."""
    rows = []
    for users in concurrencies:
        grpc = [run for run in runs if run["target"] == "OIP gRPC" and run["concurrency"] == users]
        rest = [run for run in runs if run["target"] == "OIP REST" and run["concurrency"] == users]
        pairs = list(zip(grpc, rest, strict=True))
        ratios = [g["requests_per_s"] / r["requests_per_s"] for g, r in pairs]
        gaps = [g["latency_ms"]["p50"] - r["latency_ms"]["p50"] for g, r in pairs]
        rows.append(
            [
                users,
                " / ".join(f"{ratio:.2f}" for ratio in ratios),
                f"{statistics.median(ratios):.2f}",
                " / ".join(f"{gap:+.2f}" for gap in gaps),
                f"{statistics.median(gaps):+.2f}",
            ]
        )
    header = ["concurrency", "gRPC / REST req/s", "median", "gRPC p50 less REST's, ms", "median"]
    return markdown_table(header, rows)


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_serve_arg(parser)
    parser.add_argument("--concurrency", nargs="+", type=int, default=[1, 16])
    parser.add_argument("--empty", action="store_true", help="add ServerLive and GET /ping")
    parser.add_argument("--rounds", type=int, default=1, help="gRPC and REST in turn, N times")
    parser.add_argument("--duration", type=int, default=15, help="seconds per measured run")
    parser.add_argument("--warmup", type=int, default=5, help="seconds of discarded warm-up")
    parser.add_argument("--server-core", default="1")
    parser.add_argument("--wrk-core", default="0", help="the load generators' core")
    return parser.parse_args()


def ensure_h2load() -> None:
    """Install h2load (Debian's nghttp2-client) with apt-get when it is missing."""
    if shutil.which("h2load"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo", "-n"]
    print("h2load is missing; installing nghttp2-client with apt-get", file=sys.stderr)
    subprocess.run([*sudo, "apt-get", "update"], check=True)
    subprocess.run([*sudo, "apt-get", "install", "-y", "nghttp2-client"], check=True)


def oip_json() -> bytes:
    tensor = {"name": "input-0", "datatype": "FP32", "shape": [1, 4], "data": ROW}
    return json.dumps({"inputs": [tensor]}).encode()


def model_infer() -> bytes:
    """A ModelInferRequest as tritonclient.grpc builds it: raw little-endian FP32 contents."""
    from modelhost.rpc.messages import message

    request = message("inference.ModelInferRequest")(model_name=MODEL)
    request.inputs.add(name="input-0", datatype="FP32", shape=[1, 4])
    request.raw_input_contents.append(struct.pack("<4f", *ROW))
    return bytes(request.SerializeToString())


def check_grpc(address: str, frame: bytes) -> None:
    """The request h2load sends, answered with a prediction by a real gRPC client's call."""
    import grpc

    from modelhost.rpc.messages import message

    with grpc.insecure_channel(address) as channel:
        call = channel.unary_unary(MODEL_INFER)
        reply = message("inference.ModelInferResponse").FromString(call(frame[5:], timeout=30))
    if [output.name for output in reply.outputs] != ["predict"]:
        raise RuntimeError(f"ModelInfer answered {reply}")


def grpc_frame(message: bytes) -> bytes:
    """gRPC's framing of one message: not compressed, its length, the message."""
    return b"\x00" + struct.pack(">I", len(message)) + message


def _runs(args: argparse.Namespace, target: str, run: Any) -> list[dict[str, Any]]:
    runs = []
    for users in args.concurrency:
        run(users, args.warmup)
        runs.append({"target": target, "concurrency": users, **run(users, args.duration)})
        print(markdown_table(HEADER, [_table_row(runs[-1], "target")]).splitlines()[-1], flush=True)
    return runs


def _wrk(
    url: str, body: bytes, users: int, duration_s: int, args: argparse.Namespace
) -> dict[str, Any]:
    os.environ["WRK_BODY"] = body.decode()  # post.lua's body
    return wrk(url, users, duration_s, args.wrk_core)


def h2load(
    url: str,
    request: Path,
    users: int,
    duration_s: int,
    args: argparse.Namespace,
    base: str = "",
) -> dict[str, Any]:
    """One h2load run, a connection per user; latencies from its per-request log. A call that
    gRPC answered with an error still has HTTP status 200: the run is checked once by a real
    client before it counts (see `check_grpc`)."""
    log = request.with_name("h2load.log")
    log.unlink(missing_ok=True)  # h2load appends: the warm-up's lines would count again
    command = ["taskset", "-c", args.wrk_core, "h2load", "-c", str(users), "-m", "1"]
    command += ["-D", str(duration_s), "-H", "content-type: application/grpc"]
    command += ["-H", "te: trailers", "-d", str(request), "--log-file", str(log), url]
    command += ["-B", base] if base else []  # unix:PATH, to reach a Unix socket
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    times_us = sorted(int(line.split("\t")[2]) for line in log.read_text().splitlines())
    statuses = [line.split("\t")[1] for line in log.read_text().splitlines()]
    elapsed_s = float(done.stdout.split("finished in ")[1].split("s,")[0])
    return {
        "requests": len(times_us),
        "requests_per_s": len(times_us) / elapsed_s,
        "latency_ms": {
            "p50": _quantile(times_us, 0.5) / 1000,
            "p90": _quantile(times_us, 0.9) / 1000,
            "p99": _quantile(times_us, 0.99) / 1000,
        },
        "error_count": sum(status != "200" for status in statuses),
        "h2load_output": done.stdout,
    }


def _quantile(values: list[int], q: float) -> float:
    return float(values[min(len(values) - 1, int(q * len(values)))]) if values else float("nan")


if __name__ == "__main__":
    main()
