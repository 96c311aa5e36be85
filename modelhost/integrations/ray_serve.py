"""modelhost as a Ray Serve application (`pip install modelhost[ray]`).

Each replica runs a modelhost server as a child, and the model is Ray's multiplexed model id,
so Ray sends each model to the replicas that served it.

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
PORT_ATTEMPTS = 3  # another replica may take the port before ours binds it


class ModelhostReplica:
    def __init__(self, serve_args: Sequence[str], startup_timeout_s: float = 120.0) -> None:
        name = _replica_name()
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
        """The server loads the model on its first request."""
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
        """The server drains on SIGTERM."""
        with contextlib.suppress(Exception):
            self.process.send_signal(signal.SIGTERM)
            self.process.wait(60)


class ModelhostIngress:
    """Routes each request by its model."""

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
    """Servers behind an ingress; `{replica}` in `serve_args` becomes the replica's name.

    `max_models_per_replica` must exceed what a budget holds, or Ray forgets loaded models.
    """
    from ray import serve

    multiplexed = serve.multiplexed(max_num_models_per_replica=max_models_per_replica)
    # Ray finds the method by its function's name
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
    """No preexec_fn: forking a Ray worker aborts the child in gRPC's threads."""
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
    """False if our server exited first, as when its port was taken."""
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
    """SIGTERM when the replica dies, since Ray may skip its __del__."""
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent_pid:  # the replica died before the line above
        sys.exit("modelhost: the Ray replica that started this server is gone")
    os.execv(sys.executable, [sys.executable, "-m", "modelhost", *args])  # the death signal stays


if __name__ == "__main__":
    _serve_with_parent(int(sys.argv[1]), sys.argv[2:])
