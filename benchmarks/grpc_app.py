"""The Python side of one gRPC call on the h2corn front: GrpcApp (rpc/asgi.py) on an in-memory
ASGI stream, in process, with no HTTP/2 and no worker.

Each case is timed in the thread's CPU time (a neighbour's burst does not count), the best of
`--rounds` runs of `--calls` calls, and the cases alternate: `echo` (bytes back, no protobuf),
`observed` (an observed method answering a canned ModelInferResponse) and `model-infer`
(OipServicer.ModelInfer, its host answering iris's OIP reply at once). `--checkout DIR` times
another tree's package.

    python benchmarks/grpc_app.py
    python benchmarks/grpc_app.py --checkout /tmp/base --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import struct
import time
from collections.abc import Callable
from typing import Any

from _common import add_checkout, markdown_table, use_checkout

CASES = ("echo", "observed", "model-infer")
REPLY = {
    "model_name": "iris.joblib",
    "model_version": "1",
    "outputs": [
        {
            "name": "predict",
            "datatype": "INT64",
            "shape": [1],
            "parameters": {"binary_data_size": 8},
        }
    ],
}


def main() -> None:
    args = _parse_args()
    use_checkout(args)
    apps = {case: _app(case) for case in CASES}
    best_us = dict.fromkeys(CASES, float("inf"))
    for _ in range(args.rounds):
        for case, app in apps.items():
            best_us[case] = min(best_us[case], _timed_us(app, args.calls))
    print(
        markdown_table(
            ["case", "µs a call (thread CPU)"], [[c, f"{best_us[c]:.1f}"] for c in CASES]
        )
    )


def _app(case: str) -> Any:
    import grpc

    from modelhost.host.calls import Result
    from modelhost.rpc.asgi import CallLimits, GrpcApp
    from modelhost.rpc.calls import Calls
    from modelhost.rpc.messages import OIP_SERVICE, message
    from modelhost.rpc.oip import OipServicer
    from modelhost.rpc.stubs import method_handlers
    from modelhost.workers.oip_media import oip_media_type

    header = json.dumps(REPLY).encode()
    result = Result(header + struct.pack("<q", 0), oip_media_type(len(header)), "hit", {})

    class Host:
        def versions_of(self, name: str) -> None:
            return None

        def resolve(self, name: str) -> str:
            return name

        async def invoke(self, held: str, invocation: Any) -> Result:
            return result

    request, response = (message(f"inference.ModelInfer{kind}") for kind in ("Request", "Response"))
    canned = response(model_name="iris.joblib")

    async def echo(request: bytes, context: Any) -> bytes:
        return request

    async def observed(request: Any, context: Any, call: Any) -> Any:
        return canned

    calls = Calls(None, "")
    handler: Any
    if case == "echo":
        handler = grpc.unary_unary_rpc_method_handler(echo)
    elif case == "observed":
        handler = grpc.unary_unary_rpc_method_handler(
            calls.observing("/x", observed),
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
    else:
        servicer = OipServicer(Host(), None, None)  # type: ignore[arg-type]
        handler = method_handlers(OIP_SERVICE, servicer, calls)["ModelInfer"]
    path = f"/{OIP_SERVICE}/ModelInfer"
    return GrpcApp({path: handler}, [], CallLimits(10, 2**20, 100))


def _timed_us(app: Callable[..., Any], calls: int) -> float:
    from grpc_path import model_infer  # here: it imports modelhost, which may be --checkout's

    from modelhost.rpc.messages import OIP_SERVICE
    from modelhost.rpc.wire import framed

    body = framed(model_infer())
    headers = [(b"host", b"127.0.0.1:8001"), (b"content-type", b"application/grpc")]
    path = f"/{OIP_SERVICE}/ModelInfer"
    scope: dict[str, Any] = {"type": "http", "path": path, "headers": headers}
    scope["client"] = ("127.0.0.1", 5000)
    status: list[bytes] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(event: dict[str, Any]) -> None:
        if event["type"] == "http.response.trailers":
            status.append(dict(event["headers"])[b"grpc-status"])

    async def run() -> float:
        started = time.thread_time()
        for _ in range(calls):
            await app(scope, receive, send)
        return time.thread_time() - started

    spent_s = asyncio.run(run())
    if set(status) != {b"0"}:
        raise RuntimeError(f"a call failed: grpc-status {set(status)}")
    return spent_s / calls * 1e6


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_checkout(parser)
    parser.add_argument("--calls", type=int, default=5000, help="calls a run")
    parser.add_argument("--rounds", type=int, default=7, help="runs of each case, the best kept")
    return parser.parse_args()


if __name__ == "__main__":
    main()
