"""How each server in the race is laid out, started, asked, and understood.

Every server gets a work folder, a copy of the same iris model and free loopback ports, and is
described by a `Launch`: the command (the runner pins it), its environment, the URL and wrk
script to load it with, the body of one request, and an optional step to run once the process
answers (TorchServe and MMS register the model through their management API there), and for
the servers with a gRPC port (modelhost, TorchServe, MLServer) the call to load it with over
gRPC. Settings that differ from a server's defaults are listed in README.md beside this file.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from install import venvs_root

PEERS_DIR = Path(__file__).resolve().parent
BENCHMARKS = PEERS_DIR.parent
POST_LUA = BENCHMARKS / "post.lua"
V2_LUA = PEERS_DIR / "lua" / "v2_infer.lua"
ROW = [5.1, 3.5, 1.4, 0.2]  # the row post.lua and lua/v2_infer.lua send
MODEL_NAME = "iris"
OIP_INFER = "/inference.GRPCInferenceService/ModelInfer"
TS_PREDICTIONS = "/org.pytorch.serve.grpc.inference.InferenceAPIsService/Predictions"
# modelhost's gRPC fronts (`--grpc-front`), each raced as `modelhost-FRONT`, and its package
FRONT_PACKAGES = {"h2corn": "h2corn", "pygrpc-native": "pygrpc-native", "grpc.aio": "grpcio"}


def row_body(row: list[float]) -> bytes:
    """modelhost's, the floor's and the .mar handler's request: one JSON row."""
    return json.dumps(row).encode()


def v2_body(row: list[float]) -> bytes:
    """MLServer's V2 inference request: one FP64 tensor of shape [1, 4]."""
    tensor = {"name": "predict", "shape": [1, len(row)], "datatype": "FP64", "data": row}
    return json.dumps({"inputs": [tensor]}).encode()


def oip_infer(model: str, tensor: str) -> bytes:
    """An OIP ModelInferRequest of ROW: one FP64 tensor of shape [1, 4], typed contents."""
    from modelhost.rpc.messages import message

    request = message("inference.ModelInferRequest")(model_name=model)
    request.inputs.add(name=tensor, datatype="FP64", shape=[1, len(ROW)])
    request.inputs[0].contents.fp64_contents.extend(ROW)
    return bytes(request.SerializeToString())


def ts_predictions() -> bytes:
    """TorchServe's PredictionsRequest of ROW, the body its REST API takes under "data"."""
    from modelhost.rpc.messages import message

    request = message("org.pytorch.serve.grpc.inference.PredictionsRequest")
    return bytes(request(model_name=MODEL_NAME, input={"data": row_body(ROW)}).SerializeToString())


@dataclass
class GrpcCall:
    """A unary gRPC call to load a server with: its port, method path and request message."""

    port: int
    path: str
    message: bytes


@dataclass(kw_only=True)
class Launch:
    """One server laid out in its work folder, ready to start."""

    argv: list[str]
    url: str
    lua: Path
    encode: Callable[[list[float]], bytes]  # the request body for one row
    cwd: Path
    env: dict[str, str] = field(default_factory=dict)
    after_start: Callable[[], None] | None = None  # e.g. register the model
    ready_url: str = ""  # a GET that answers once the process listens; else the POST itself
    grpc: GrpcCall | None = None  # the server's gRPC inference call, if it has a gRPC port

    @property
    def body(self) -> bytes:
        return self.encode(ROW)


@dataclass
class Options:
    serve_args: list[str]
    batch_size: int
    batch_delay_ms: int


@dataclass
class Server:
    name: str
    launch: Callable[[Path, Path, Options], Launch]  # (work folder, model file, options)
    predictions: Callable[[Any], list[Any]]  # the predictions in a parsed answer
    versions: Callable[[], dict[str, str]]


def peer_venv(peer: str) -> Path:
    """The peer's venv, installed by install.py."""
    venv = venvs_root() / peer
    if not (venv / ".installed").exists():
        raise RuntimeError(
            f"no {peer} venv in {venv}: run .venv/bin/python benchmarks/peers/install.py "
            "(with the same PEERS_VENVS)"
        )
    return venv


def free_ports(count: int) -> list[int]:
    """Ports on 127.0.0.1 free a moment ago, below 32768: MMS refuses higher port numbers
    ("Invalid port number"), and the kernel hands out ephemeral ports above it."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randrange(20000, 32768)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


# ---------------------------------------------------------------------------- modelhost, floor


def _modelhost(front: str | None) -> Callable[[Path, Path, Options], Launch]:
    """modelhost on its default gRPC front, or on `front` (`--grpc-front`)."""

    def launch(work: Path, model: Path, options: Options) -> Launch:
        store = work / "store"
        store.mkdir()
        shutil.copy(model, store / "iris.joblib")
        port, grpc = free_ports(2)
        argv = [sys.executable, "-m", "modelhost", "serve", "--model-store", str(store)]
        argv += ["--workers", "1", "--cache-dir", str(work / "cache"), "--grpc-port", str(grpc)]
        argv += ["--host", "127.0.0.1", "--port", str(port)]
        argv += [*(["--grpc-front", front] if front else []), *options.serve_args]
        base = f"http://127.0.0.1:{port}"
        return Launch(
            argv=argv,
            url=f"{base}/models/iris.joblib/invoke",
            lua=POST_LUA,
            encode=row_body,
            cwd=work,
            ready_url=f"{base}/ping",
            grpc=GrpcCall(grpc, OIP_INFER, oip_infer("iris.joblib", "input-0")),
        )

    return launch


def _floor(work: Path, model: Path, options: Options) -> Launch:
    (port,) = free_ports(1)
    argv = [sys.executable, str(BENCHMARKS / "floor_app.py"), str(model), "--port", str(port)]
    base = f"http://127.0.0.1:{port}"
    return Launch(
        argv=argv, url=f"{base}/", lua=POST_LUA, encode=row_body, cwd=work, ready_url=f"{base}/ping"
    )


def _repo_versions(front: str | None) -> Callable[[], dict[str, str]]:
    """modelhost's, with the gRPC front that serves (the default's resolved) and its package."""

    def versions() -> dict[str, str]:
        from importlib.metadata import version

        from modelhost.rpc.fronts import front_of

        serving = front or front_of("auto")
        packages = ["modelhost", "uvicorn", "scikit-learn", FRONT_PACKAGES[serving]]
        return {"gRPC front": serving, **{name: version(name) for name in packages}}

    return versions


def _floor_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {name: version(name) for name in ("uvicorn", "uvloop", "httptools", "scikit-learn")}


def _predictions_field(answer: Any) -> list[Any]:
    return list(answer["predictions"])


# ---------------------------------------------------------------------------- TorchServe, MMS


def _archive_server(peer: str, batched: bool) -> Callable[[Path, Path, Options], Launch]:
    """TorchServe or MMS: a .mar of handler.py + the model, registered with one worker."""

    def launch(work: Path, model: Path, options: Options) -> Launch:
        venv = peer_venv(peer)
        store = work / "store"
        _archive(peer, venv, model, work, store)
        inference, management, metrics, grpc, grpc_management = free_ports(5)
        config = [
            f"inference_address=http://127.0.0.1:{inference}",
            f"management_address=http://127.0.0.1:{management}",
        ]
        if peer == "torchserve":
            config += [
                f"metrics_address=http://127.0.0.1:{metrics}",
                f"grpc_inference_port={grpc}",
                f"grpc_management_port={grpc_management}",
                "disable_token_authorization=true",  # else every request needs a bearer token
                "enable_model_api=true",  # lets the management API register the model
            ]
        (work / "config.properties").write_text("\n".join(config) + "\n")
        command = "torchserve" if peer == "torchserve" else "multi-model-server"
        argv = [str(venv / "bin" / command), "--start", "--foreground", "--model-store"]
        argv += [str(store), _config_flag(peer), str(work / "config.properties")]
        if peer == "torchserve":
            argv.append("--ncs")  # no config snapshots written to the work folder
        size, delay = (options.batch_size, options.batch_delay_ms) if batched else (1, 100)
        register = _register(f"http://127.0.0.1:{management}", size, delay)
        env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}  # workers run `python3`
        url = f"http://127.0.0.1:{inference}/predictions/{MODEL_NAME}"
        return Launch(
            argv=argv,
            url=url,
            lua=POST_LUA,
            encode=row_body,
            cwd=work,
            env=env,
            after_start=register,
            ready_url=f"http://127.0.0.1:{inference}/ping",
            grpc=GrpcCall(grpc, TS_PREDICTIONS, ts_predictions()) if peer == "torchserve" else None,
        )

    return launch


def _config_flag(peer: str) -> str:
    return "--ts-config" if peer == "torchserve" else "--mms-config"


def _archive(peer: str, venv: Path, model: Path, work: Path, store: Path) -> None:
    """`store/iris.mar` holding handler.py and the model as model.joblib."""
    store.mkdir()
    source = work / "mar-source"
    source.mkdir()
    shutil.copy(model, source / "model.joblib")
    shutil.copy(PEERS_DIR / "handler.py", source / "handler.py")
    if peer == "torchserve":
        argv = [str(venv / "bin" / "torch-model-archiver"), "--version", "1.0"]
        argv += ["--serialized-file", str(source / "model.joblib")]
        argv += ["--handler", str(source / "handler.py")]
    else:
        argv = [str(venv / "bin" / "model-archiver"), "--model-path", str(source)]
        argv += ["--handler", "handler:handle", "--runtime", "python3"]
    argv += ["--model-name", MODEL_NAME, "--export-path", str(store), "-f"]
    subprocess.run(argv, check=True, capture_output=True)


def _register(management_url: str, batch_size: int, batch_delay_ms: int) -> Callable[[], None]:
    def register() -> None:
        import httpx

        params = {
            "url": f"{MODEL_NAME}.mar",
            "model_name": MODEL_NAME,
            "initial_workers": 1,
            "synchronous": "true",
            "batch_size": batch_size,
            "max_batch_delay": batch_delay_ms,
        }
        answer = httpx.post(f"{management_url}/models", params=params, timeout=120)
        if answer.status_code != 200:
            raise RuntimeError(f"registering {MODEL_NAME}.mar: {answer.status_code} {answer.text}")

    return register


def _venv_versions(peer: str, packages: list[str]) -> Callable[[], dict[str, str]]:
    def versions() -> dict[str, str]:
        script = "import importlib.metadata as m, json, sys; "
        script += "print(json.dumps({p: m.version(p) for p in sys.argv[1:]}))"
        python = str(venvs_root() / peer / "bin" / "python")
        done = subprocess.run([python, "-c", script, *packages], capture_output=True, text=True)
        found: dict[str, str] = json.loads(done.stdout) if done.returncode == 0 else {}
        if peer in ("torchserve", "mms"):
            found["java"] = _java_version()
        return found

    return versions


def _java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return done.stderr.splitlines()[0] if done.stderr else "unknown"


# ---------------------------------------------------------------------------- MLServer


def _mlserver(batched: bool) -> Callable[[Path, Path, Options], Launch]:
    """MLServer with mlserver-sklearn's runtime; `parallel_workers` left at its default (1)."""

    def launch(work: Path, model: Path, options: Options) -> Launch:
        venv = peer_venv("mlserver")
        folder = work / "models" / MODEL_NAME
        folder.mkdir(parents=True)
        shutil.copy(model, folder / "model.joblib")
        model_settings: dict[str, Any] = {
            "name": MODEL_NAME,
            "implementation": "mlserver_sklearn.SKLearnModel",
            "parameters": {"uri": "./model.joblib"},
        }
        if batched:  # adaptive batching: up to max_batch_size requests, waiting max_batch_time s
            model_settings["max_batch_size"] = options.batch_size
            model_settings["max_batch_time"] = options.batch_delay_ms / 1000
        (folder / "model-settings.json").write_text(json.dumps(model_settings, indent=2))
        http, grpc, metrics = free_ports(3)
        settings = {
            "host": "127.0.0.1",
            "http_port": http,
            "grpc_port": grpc,
            "metrics_port": metrics,
        }
        (work / "models" / "settings.json").write_text(json.dumps(settings, indent=2))
        argv = [str(venv / "bin" / "mlserver"), "start", str(work / "models")]
        env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}"}
        base = f"http://127.0.0.1:{http}"
        return Launch(
            argv=argv,
            url=f"{base}/v2/models/{MODEL_NAME}/infer",
            lua=V2_LUA,
            encode=v2_body,
            cwd=work,
            env=env,
            ready_url=f"{base}/v2/health/live",
            grpc=GrpcCall(grpc, OIP_INFER, oip_infer(MODEL_NAME, "predict")),
        )

    return launch


def _v2_predictions(answer: Any) -> list[Any]:
    return list(answer["outputs"][0]["data"])


# ---------------------------------------------------------------------------- the table

_TS_PACKAGES = ["torchserve", "torch-model-archiver", "torch", "scikit-learn"]
_MMS_PACKAGES = ["multi-model-server", "model-archiver", "scikit-learn"]
_MLSERVER_PACKAGES = ["mlserver", "mlserver-sklearn", "uvloop", "scikit-learn"]

SERVERS = {
    server.name: server
    for server in [
        Server("modelhost", _modelhost(None), _predictions_field, _repo_versions(None)),
        *[
            Server(
                f"modelhost-{front}", _modelhost(front), _predictions_field, _repo_versions(front)
            )
            for front in FRONT_PACKAGES
        ],
        Server("floor", _floor, _predictions_field, _floor_versions),
        Server(
            "torchserve",
            _archive_server("torchserve", False),
            _predictions_field,
            _venv_versions("torchserve", _TS_PACKAGES),
        ),
        Server(
            "torchserve-batch",
            _archive_server("torchserve", True),
            _predictions_field,
            _venv_versions("torchserve", _TS_PACKAGES),
        ),
        Server(
            "mms",
            _archive_server("mms", False),
            _predictions_field,
            _venv_versions("mms", _MMS_PACKAGES),
        ),
        Server(
            "mms-batch",
            _archive_server("mms", True),
            _predictions_field,
            _venv_versions("mms", _MMS_PACKAGES),
        ),
        Server(
            "mlserver",
            _mlserver(False),
            _v2_predictions,
            _venv_versions("mlserver", _MLSERVER_PACKAGES),
        ),
        Server(
            "mlserver-batch",
            _mlserver(True),
            _v2_predictions,
            _venv_versions("mlserver", _MLSERVER_PACKAGES),
        ),
    ]
}
