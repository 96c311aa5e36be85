"""--refuse-pickle against models that are programs: a TorchScript or SavedModel that reads or
writes the host's files cannot, and models that are data still answer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from modelhost import testing

pytestmark = pytest.mark.e2e

SECRET = b"SECRET-0123456789"  # sixteen bytes read, one more that must not matter
ROWS = [[0.0, 0.0, 0.0, 0.0]]


def torch_file_reader(path: Path, target: Path, *, shared: bool) -> Path:
    """A TorchScript module whose forward maps `target` (writing it when `shared`)."""
    import torch

    class Reader(torch.nn.Module):
        def __init__(self, target: str, shared: bool) -> None:
            super().__init__()
            self.target, self.shared = target, shared

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            data = torch.from_file(self.target, shared=self.shared, size=16, dtype=torch.uint8)
            if self.shared:
                data.fill_(65)
            return data.to(torch.float32).reshape(1, 16).expand(x.shape[0], 16)

    with warnings.catch_warnings():  # TorchScript is deprecated; attackers still ship it
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.script(Reader(str(target), shared)), str(path))
    return path


_SAVED_MODELS = """
import sys
import tensorflow as tf

class FileReader(tf.Module):
    def __init__(self, target, write):
        super().__init__()
        self.target, self.write = target, write

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(self, features):
        if self.write:
            tf.io.write_file(self.target, "written by a model")
            return {"out": features}
        codes = tf.cast(tf.io.decode_raw(tf.io.read_file(self.target), tf.uint8), tf.float32)
        return {"out": tf.tile(codes[None, :16], [tf.shape(features)[0], 1])}

class Weights(tf.Module):
    def __init__(self):
        super().__init__()
        self.w = tf.Variable(tf.ones([4, 3]))

    @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
    def serve(self, features):
        return {"out": features @ self.w}

for folder, target, action in zip(*[iter(sys.argv[1:])] * 3):
    model = Weights() if action == "none" else FileReader(target, action == "write")
    tf.saved_model.save(model, folder, signatures={"serving_default": model.serve})
"""


def saved_models(reader: tuple[Path, Path], writer: tuple[Path, Path], plain: Path) -> None:
    """Three SavedModels: one whose signature runs ReadFile on its target (folder, target), one
    WriteFile, and one that reads only its own variables. In one child, as TensorFlow does not
    survive this process's forks and importing it once is enough."""
    folders = [str(p) for p in (*reader, "read", *writer, "write", plain, "-", "none")]
    command = [sys.executable, "-c", _SAVED_MODELS, *folders]
    subprocess.run(command, check=True, capture_output=True, timeout=300)


_PROBE = """
import os, socket, subprocess

def attempt(action):
    try:
        action()
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return "done"

def handle(data, context):
    if data is None:
        return None
    address = ("127.0.0.1", {port})
    tries = {{
        "read": lambda: open({secret!r}, "rb").read(),
        "write": lambda: open({written!r}, "w").write("x"),
        "tcp": lambda: socket.create_connection(address, timeout=2),
        "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", address),
        "exec": lambda: subprocess.run(["/bin/true"], check=True),
        "signal": lambda: os.kill(os.getppid(), 0),
        "memory file": lambda: os.memfd_create("held"),
    }}
    return [{{name: attempt(action) for name, action in tries.items()}} for _ in data]
"""


def probe_handler(folder: Path, outside: Path, port: int) -> Path:
    """A handler that tries to read, write, connect, exec and signal, and says what it did."""
    folder.mkdir()
    source = _PROBE.format(port=port, secret=str(outside / "secret"), written=str(outside / "w"))
    (folder / "handler.py").write_text(source)
    return folder


def has_tensorflow() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of the host's that no model's folder holds: a secret, and room for writes."""
    folder = tmp_path_factory.mktemp("host")
    (folder / "secret").write_bytes(SECRET)
    return folder


@pytest.fixture(scope="module")
def listener() -> Iterator[socket.socket]:
    """A TCP port of the host's that no sandboxed worker may reach."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(0.1)
        yield server


@pytest.fixture(scope="module")
def program_store(
    tmp_path_factory: pytest.TempPathFactory, outside: Path, listener: socket.socket
) -> Path:
    root = tmp_path_factory.mktemp("store")
    probe_handler(root / "probe", outside, listener.getsockname()[1])
    torch_file_reader(root / "reader.pt", outside / "secret", shared=False)
    torch_file_reader(root / "writer.pt", outside / "written-by-torch", shared=True)
    if has_tensorflow():
        reader = (root / "tf-reader", outside / "secret")
        writer = (root / "tf-writer", outside / "tf/made/here")
        saved_models(reader, writer, root / "tf-weights")
    testing.torch_iris(root / "iris.pt")  # programs that touch no file of the host's
    testing.torch_iris(root / "iris.pt2")
    testing.onnx_iris(root / "iris.onnx")  # a scikit-learn model, shipped as data
    packed = testing.onnx_iris(tmp_path_factory.mktemp("packed") / "model.onnx")
    testing.tar_gz_of(packed.parent, root / "iris.tar.gz")  # read from the cache, not the store
    testing.xgboost_iris(root / "iris.ubj")
    testing.lightgbm_iris(root / "iris.txt")
    return root


@pytest.fixture(scope="module")
def sandboxed(
    program_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    cache = tmp_path_factory.mktemp("cache")
    args = [*testing.serve_args(program_store, cache, workers=1), "--refuse-pickle"]
    with testing.RunningServer(args, tmp_path_factory.mktemp("server")) as running:
        yield running


def invoke(server: testing.RunningServer, name: str) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{name}/invoke", json=ROWS, timeout=120)


def test_the_start_line_says_workers_are_sandboxed(sandboxed: testing.RunningServer) -> None:
    assert "--refuse-pickle: untrusted models load in sandboxed workers" in sandboxed.log_text()


def test_handler_code_cannot_reach_the_host(
    sandboxed: testing.RunningServer, outside: Path, listener: socket.socket
) -> None:
    """A handler's Python reads no host file, writes none, connects nowhere, runs no program,
    signals no process outside its worker, and makes no file in memory, which no PSS counts
    until it is mapped and Landlock does not see."""
    response = invoke(sandboxed, "probe")
    assert response.status_code == 200, response.text
    outcomes = response.json()
    assert set(outcomes) == {"read", "write", "tcp", "udp", "exec", "signal", "memory file"}
    assert "done" not in outcomes.values(), outcomes
    assert not (outside / "w").exists()
    with pytest.raises(TimeoutError):
        listener.accept()


def test_torchscript_cannot_read_a_host_file(sandboxed: testing.RunningServer) -> None:
    """torch.from_file in forward gets no byte of a file outside the model's folder."""
    response = invoke(sandboxed, "reader.pt")
    assert response.status_code != 200, response.text
    assert str(float(SECRET[0])) not in response.text
    assert "Permission denied" in response.text  # the sandbox refused, not something else


def test_torchscript_cannot_write_a_host_file(
    sandboxed: testing.RunningServer, outside: Path
) -> None:
    """torch.from_file(shared=True) in forward creates no file."""
    response = invoke(sandboxed, "writer.pt")
    assert response.status_code != 200, response.text
    assert "Permission denied" in response.text
    assert not (outside / "written-by-torch").exists()


@pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed")
def test_saved_model_cannot_read_a_host_file(sandboxed: testing.RunningServer) -> None:
    """A SavedModel's ReadFile op gets no byte of a file outside the model's folder."""
    response = invoke(sandboxed, "tf-reader")
    assert response.status_code != 200, response.text
    assert "Permission denied" in response.text
    assert str(float(SECRET[0])) not in response.text


@pytest.mark.skipif(not has_tensorflow(), reason="tensorflow is not installed")
def test_saved_model_cannot_write_a_host_file(
    sandboxed: testing.RunningServer, outside: Path
) -> None:
    """A SavedModel's WriteFile op creates neither the file nor its folders."""
    response = invoke(sandboxed, "tf-writer")
    assert response.status_code != 200, response.text
    assert "Permission denied" in response.text
    assert not (outside / "tf").exists()


ANSWERING = ["iris.pt", "iris.pt2", "iris.onnx", "iris.tar.gz", "iris.ubj", "iris.txt"]


@pytest.mark.parametrize("name", ANSWERING + (["tf-weights"] if has_tensorflow() else []))
def test_models_that_touch_no_host_file_answer(sandboxed: testing.RunningServer, name: str) -> None:
    """ONNX (a scikit-learn model converted; in the store, and unpacked into the cache), XGBoost
    and LightGBM load and answer, and so do programs that read nothing but their own folder."""
    response = invoke(sandboxed, name)
    assert response.status_code == 200, response.text
    assert len(json.loads(response.text)) == 1


@pytest.fixture(scope="module")
def unsandboxed(
    program_store: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[testing.RunningServer]:
    """A server where Landlock cannot be had: its binding shadowed by a module that fails."""
    shadow = tmp_path_factory.mktemp("shadow")
    (shadow / "landlockpy.py").write_text("raise ImportError('no Landlock on this machine')\n")
    path = os.pathsep.join([str(shadow), *filter(None, [os.environ.get("PYTHONPATH")])])
    cache = tmp_path_factory.mktemp("cache")
    args = [*testing.serve_args(program_store, cache, workers=1), "--refuse-pickle"]
    log_dir = tmp_path_factory.mktemp("server")
    env = {**os.environ, "PYTHONPATH": path}
    with testing.RunningServer(args, log_dir, env=env) as running:
        yield running


@pytest.mark.parametrize("name", ["reader.pt", "iris.pt", "probe"])
def test_without_sandbox_programs_are_refused(
    unsandboxed: testing.RunningServer, name: str
) -> None:
    """Where the machine lacks Landlock, programs are refused, saying why and what to ship."""
    response = invoke(unsandboxed, name)
    assert response.status_code == 500, response.text
    assert response.json()["type"] == "UnsafeArtifact"
    assert "Landlock ABI 6" in response.json()["message"]
    assert "ship ONNX" in response.json()["message"]
    log = unsandboxed.log_text()
    assert "--refuse-pickle: program formats are refused: no sandbox, as Landlock" in log


def test_without_sandbox_data_still_answers(unsandboxed: testing.RunningServer) -> None:
    assert invoke(unsandboxed, "iris.onnx").status_code == 200
