"""modelhost as a Ray Serve application, for Ray users (`pip install modelhost[ray]`).

Each replica runs a whole modelhost server (frontend, template, workers) as a child process on a
loopback port, with its own memory budget, and forwards to it. An ingress deployment reads the
model of each request (the path's model, or SageMaker's target-model header) and calls the
replicas with it as Ray's multiplexed model id, so Ray's router sends each model to the replicas
that have served it before — the affinity deploy/nginx gets from its consistent hash. Ray only
tracks which replica has which model; loading, eviction and budgets stay modelhost's.

    from modelhost.integrations.ray_serve import modelhost_app
    serve.run(modelhost_app(["--model-store", "s3://bucket/models"], replicas=4))
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx

from modelhost.http.instance import INSTANCE_HEADER
from modelhost.integrations.routing import target_model

INSTANCE = INSTANCE_HEADER.decode()

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host"}
PR_SET_PDEATHSIG = 1
# another replica may take the same free port between our look and our server's bind
PORT_ATTEMPTS = 3


class ModelhostReplica:
    """One replica: a modelhost server it started, and the forwarding to it."""

    def __init__(self, serve_args: Sequence[str], startup_timeout_s: float = 120.0) -> None:
        name = _replica_name()
        # "{replica}" in an argument: this replica's name, e.g. a --cache-dir of its own
        own = [a.replace("{replica}", name) for a in serve_args]
        for attempt in range(PORT_ATTEMPTS):
            self.port = _free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.instance_id = f"{name}@127.0.0.1:{self.port}"
            self.process = _start_server(own, self.port, self.instance_id)
            if _wait_ready(self.url, self.instance_id, self.process, startup_timeout_s):
                break
            if attempt == PORT_ATTEMPTS - 1:
                code = self.process.returncode
                raise RuntimeError(f"modelhost serve exited with {code} before /ping answered")
        self.client = httpx.AsyncClient(base_url=self.url, timeout=None)

    async def serves(self, model: str) -> str:
        """Ray's multiplexing calls this the first time this replica gets `model`; modelhost
        itself loads the model on its first request."""
        return model

    async def invoke(
        self, method: str, path: str, query: bytes, headers: list[tuple[str, str]], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        from ray import serve

        model = serve.get_multiplexed_model_id()
        if model:
            await self.model_served(model)  # type: ignore[attr-defined]
        url = path + (f"?{query.decode('latin-1')}" if query else "")
        response = await self.client.request(method, url, headers=headers, content=body)
        kept = [(k, v) for k, v in response.headers.multi_items() if k not in HOP_BY_HOP]
        return response.status_code, kept, response.content

    def __del__(self) -> None:
        """Ray Serve's graceful stop: SIGTERM, and the server drains before it exits."""
        with contextlib.suppress(Exception):
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)


class ModelhostIngress:
    """Reads each request's model and sends the request to a replica by it."""

    def __init__(self, replicas: Any) -> None:
        self.replicas = replicas

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import Response

        headers = [(k, v) for k, v in request.headers.items() if k not in HOP_BY_HOP]
        model = target_model(request.url.path, dict(headers))
        handle = self.replicas.options(method_name="invoke", multiplexed_model_id=model)
        status, answer_headers, body = await handle.remote(
            request.method,
            request.url.path,
            request.url.query.encode(),
            headers,
            await request.body(),
        )
        response = Response(body, status_code=status)
        response.raw_headers = [
            *response.raw_headers,
            *((k.encode(), v.encode()) for k, v in answer_headers),
        ]
        return response


def modelhost_app(
    serve_args: Sequence[str],
    replicas: int = 2,
    max_models_per_replica: int = 100_000,
    replica_options: dict[str, Any] | None = None,
) -> Any:
    """The application: `replicas` modelhost servers (each started with `serve_args`, which set
    its --memory-budget and the rest; `{replica}` in one is the replica's name, for a
    --cache-dir of its own) behind an ingress that routes by model.
    `max_models_per_replica` only bounds Ray's bookkeeping of who holds what; keep it above what
    a replica's budget holds so Ray never forgets a model modelhost still has loaded."""
    from ray import serve

    multiplexed = serve.multiplexed(max_num_models_per_replica=max_models_per_replica)
    # Ray finds the method by its function's name, so the two must match
    replica_class = type(
        "ModelhostReplica", (ModelhostReplica,), {"model_served": multiplexed(model_served)}
    )
    options = replica_options or {"num_cpus": 0}
    replica = serve.deployment(num_replicas=replicas, ray_actor_options=options)(replica_class)
    ingress = serve.deployment(ray_actor_options={"num_cpus": 0})(ModelhostIngress)
    return ingress.bind(replica.bind(list(serve_args)))


async def model_served(self: ModelhostReplica, model: str) -> str:
    return await self.serves(model)


def _replica_name() -> str:
    from ray import serve

    with contextlib.suppress(Exception):
        return f"ray-{serve.get_replica_context().replica_id.unique_id}"
    return "ray-replica"


def _start_server(
    serve_args: Sequence[str], port: int, instance_id: str
) -> subprocess.Popen[bytes]:
    """The server runs through this module's main, which ties its life to this process's. No
    preexec_fn: that would fork a Ray worker whose gRPC threads abort a forked child, while
    Popen without one spawns (vfork) and runs no code of the parent's in the child."""
    argv = [sys.executable, "-m", __name__, str(os.getpid()), "serve", *serve_args]
    argv += ["--host", "127.0.0.1", "--port", str(port), "--instance-id", instance_id]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(
    url: str, instance_id: str, process: subprocess.Popen[bytes], timeout_s: float
) -> bool:
    """True once our own server answers /ping (a 200 from whoever else holds the port does not
    count); False when it exited first, as it does when another process took its port."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return False
        with contextlib.suppress(httpx.TransportError):
            answer = httpx.get(f"{url}/ping", timeout=2)
            if answer.status_code == 200 and answer.headers.get(INSTANCE) == instance_id:
                return True
        time.sleep(0.1)
    process.terminate()
    raise RuntimeError(f"modelhost at {url} did not answer /ping in {timeout_s} s")


def _serve_with_parent(parent_pid: int, args: list[str]) -> None:
    """The child's side: SIGTERM when the replica's process dies, so no server outlives its
    replica (Ray may end a replica without running its __del__)."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the replica died before the line above
        sys.exit("modelhost: the Ray replica that started this server is gone")
    from modelhost.cli.main import main

    main(args=args)


if __name__ == "__main__":
    _serve_with_parent(int(sys.argv[1]), sys.argv[2:])
