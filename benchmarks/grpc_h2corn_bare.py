"""h2corn alone, with no modelhost: a unary echo answered in gRPC's shape, to tell what h2corn's
own I/O thread costs a call at concurrency 1 from what our app and the worker cost.

Each case starts a server on `--server-cores` (uvloop, h2corn embedded as the frontend embeds
it), warms it, then sends `--calls` calls one at a time with h2load on `--load-cores`. It
reports the p50 and, per thread (`/proc/PID/task`), the CPU, voluntary switches (waits) and
involuntary ones (preempted) a call. The answer goes out as `four` ASGI messages (start, the
message, the body's end, trailers: what rpc/calling.py sends), `three` (the body's end with the
message) or `eager` (all three sends called before any is awaited). `--runtime-threads` is
h2corn's Tokio thread count. Cases alternate, `--rounds` times.

    python benchmarks/grpc_h2corn_bare.py
    python benchmarks/grpc_h2corn_bare.py --server-cores 0,1 --load-cores 0,1 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

from _common import markdown_table, write_results

from modelhost import testing

VARIANTS = ("four", "three", "eager")
CONTENT_TYPE = (b"content-type", b"application/grpc")
STATUS = [(b"grpc-status", b"0")]
TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def main() -> None:
    args = _parse_args()
    if args.serve:
        serve(args.serve, int(args.port), int(args.runtime_threads[0]))
        return
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="modelhost-h2corn-bare-") as scratch:
        request = Path(scratch) / "request.bin"
        request.write_bytes(b"\0" + struct.pack(">I", 40) + b"x" * 40)
        for _ in range(args.rounds):
            for variant in args.variants:
                for threads in args.runtime_threads:
                    rows.append(measure(args, variant, threads, request))
                    print(_line(rows[-1]), flush=True)
    table = markdown_table(
        ["answer", "runtime threads", "p50 ms", "per thread: CPU ms / waits / preempted a call"],
        [[r["variant"], r["runtime_threads"], f"{r['p50_ms']:.3f}", _threads(r)] for r in rows],
    )
    path = write_results("grpc_h2corn_bare", {"settings": vars(args), "runs": rows}, table)
    print(f"\n{table}\n\nraw results: {path}")


def serve(variant: str, port: int, runtime_threads: int) -> None:
    """The server side: h2corn on this process's uvloop, answering each call as `variant`."""
    import uvloop
    from h2corn import Config, Server

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = (await receive()).get("body", b"")
        start = {"type": "http.response.start", "status": 200, "trailers": True}
        messages = [{**start, "headers": [CONTENT_TYPE]}]
        messages.append({"type": "http.response.body", "body": body, "more_body": True})
        if variant == "four":
            messages.append({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            messages[-1]["more_body"] = False
        messages.append({"type": "http.response.trailers", "headers": STATUS})
        if variant == "eager":
            await asyncio.gather(*[send(message) for message in messages])
            return
        for message in messages:
            await send(message)

    config = Config(
        bind=(f"127.0.0.1:{port}",),
        grpc=True,
        http1=False,
        lifespan="off",
        access_log=False,
        runtime_threads=runtime_threads,
    )
    uvloop.run(Server(cast(Any, app), config).serve())


def measure(args: argparse.Namespace, variant: str, threads: int, request: Path) -> dict[str, Any]:
    """One case: a fresh server, a warm-up, then `--calls` calls at concurrency 1."""
    port = testing.free_port()
    command = [sys.executable, __file__, "--serve", variant, "--port", str(port)]
    command += ["--runtime-threads", str(threads)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    server = subprocess.Popen(
        ["taskset", "-c", args.server_cores, *command], env=env, stdout=subprocess.DEVNULL
    )
    try:
        testing.wait_listening(port, server)
        log = request.with_name("h2load.log")
        load = ["taskset", "-c", args.load_cores, "h2load", "-c", "1", "-m", "1"]
        load += ["-H", "content-type: application/grpc", "-H", "te: trailers", "-d", str(request)]
        url = f"http://127.0.0.1:{port}/bare.Echo/Call"
        subprocess.run([*load, "-n", str(args.calls // 4), url], capture_output=True, check=True)
        before = per_thread(server.pid)
        log.unlink(missing_ok=True)
        command = [*load, "-n", str(args.calls), "--log-file", str(log), url]
        subprocess.run(command, capture_output=True, check=True)
        after = per_thread(server.pid)
    finally:
        server.terminate()
        server.wait()
    times_us = [int(line.split("\t")[2]) for line in log.read_text().splitlines()]
    spent = {
        tid: [
            (now - then) / args.calls
            for now, then in zip(after[tid][1:], before[tid][1:], strict=True)
        ]
        for tid in after
        if tid in before and after[tid][1:] != before[tid][1:]
    }
    return {
        "variant": variant,
        "runtime_threads": threads,
        "p50_ms": statistics.median(times_us) / 1000,
        "threads": {f"{after[tid][0]}:{tid}": cell for tid, cell in spent.items()},
    }


def per_thread(pid: int) -> dict[str, tuple[Any, ...]]:
    """Each thread's name, CPU ms, voluntary and involuntary switches so far."""
    found: dict[str, tuple[Any, ...]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        task = Path(f"/proc/{pid}/task/{tid}")
        fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        cpu_ms = (int(fields[11]) + int(fields[12])) * 1000 / TICKS_PER_S
        status = dict(line.split(":\t") for line in (task / "status").read_text().splitlines())
        waits = int(status["voluntary_ctxt_switches"])
        preempted = int(status["nonvoluntary_ctxt_switches"])
        found[tid] = ((task / "comm").read_text().strip(), cpu_ms, waits, preempted)
    return found


def _threads(row: dict[str, Any]) -> str:
    cells = [
        f"{name.split(':')[0]} {c:.3f} / {w:.2f} / {p:.2f}"
        for name, (c, w, p) in sorted(row["threads"].items())
    ]
    return ", ".join(cells)


def _line(row: dict[str, Any]) -> str:
    return f"{row['variant']} rt={row['runtime_threads']} p50 {row['p50_ms']:.3f} ms | " + _threads(
        row
    )


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    parser.add_argument("--runtime-threads", nargs="+", type=int, default=[1])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--server-cores", default="1")
    parser.add_argument("--load-cores", default="0")
    parser.add_argument("--serve", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--port", help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    main()
