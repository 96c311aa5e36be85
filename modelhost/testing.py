"""Helpers users and our tests share: real artifacts trained on scikit-learn's bundled data sets,
hostile archives, and a modelhost server running in a subprocess on a free loopback port.

Every maker takes the path to write. File makers treat an existing directory as "write
``model.joblib`` inside it"; folder makers create the folder. Each returns the path it wrote.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tarfile
import time
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import joblib

# ---------------------------------------------------------------------------- data and models


def iris_rows(n: int = 1) -> list[list[float]]:
    """The first `n` rows of iris (cycling past 150), as plain floats ready for JSON."""
    return _rows("iris", n)


def digits_rows(n: int = 1) -> list[list[float]]:
    """Rows of the digits data set: the input `random_forest` models take (64 features)."""
    return _rows("digits", n)


def _rows(dataset: str, n: int) -> list[list[float]]:
    from sklearn import datasets

    x = getattr(datasets, f"load_{dataset}")().data
    return [[float(v) for v in x[i % len(x)]] for i in range(n)]


def iris_logreg(path: Path) -> Path:
    """A LogisticRegression fitted on iris, dumped with joblib."""
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    return _dump(LogisticRegression(max_iter=1000).fit(x, y), path)


def padded_logreg(path: Path, total_bytes: int, seed: int = 0) -> Path:
    """The iris LogisticRegression carrying random padding up to about `total_bytes`: an artifact
    that downloads and loads like a large model but predicts like a small one."""
    import numpy as np
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(max_iter=500).fit(*load_iris(return_X_y=True))
    model.padding_ = np.random.default_rng(seed).integers(0, 256, total_bytes, dtype=np.uint8)
    return _dump(model, path)


def random_forest(path: Path, target_bytes: int = 15 * 2**20, seed: int = 0) -> Path:
    """A RandomForestClassifier on digits whose joblib file is within ±30% of `target_bytes`.

    Fully grown trees on digits dump to ~60 KB each, so a two-tree pilot gives the tree count;
    the forest is then grown (warm start) or trimmed until the size fits. Below one tree's size
    the file is one tree.
    """
    from sklearn.datasets import load_digits
    from sklearn.ensemble import RandomForestClassifier

    x, y = load_digits(return_X_y=True)
    forest = RandomForestClassifier(n_estimators=2, random_state=seed, n_jobs=-1, warm_start=True)
    forest.fit(x, y)
    path = _dump(forest, path)
    for _ in range(4):
        size = path.stat().st_size
        one_tree_too_big = size > target_bytes and len(forest.estimators_) == 1
        if abs(size - target_bytes) <= 0.1 * target_bytes or one_tree_too_big:
            break
        trees = max(1, round(len(forest.estimators_) * target_bytes / size))
        if trees > len(forest.estimators_):
            forest.n_estimators, forest.n_jobs = trees, -1
            forest.fit(x, y)
        else:
            forest.estimators_ = forest.estimators_[:trees]
            forest.n_estimators = trees
        _dump(forest, path)
    return path


# ---------------------------------------------------------------------------- other runtimes
# Each is trained on iris and written to `path` itself (the suffix picks the format); each needs
# its runtime installed (the dev extra has all but torch, which `make test` installs).


def xgboost_iris(path: Path, objective: str = "multi:softprob") -> Path:
    """An XGBoost booster on iris (`reg:squarederror` gives a regressor), saved by suffix."""
    import xgboost
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    params = {"objective": objective, "max_depth": 3, "nthread": 1}
    if objective.startswith("multi:"):
        params["num_class"] = 3
    booster = xgboost.train(params, xgboost.DMatrix(x, label=y), num_boost_round=10)
    path = _parent_made(path)
    if path.suffix == ".bst":  # xgboost names no format for .bst; write UBJSON bytes
        path.write_bytes(bytes(booster.save_raw("ubj")))
    else:
        booster.save_model(str(path))
    return path


def lightgbm_iris(path: Path) -> Path:
    """A LightGBM multiclass booster on iris, saved as text (`.txt` or `.lgb`)."""
    import lightgbm
    from sklearn.datasets import load_iris

    x, y = load_iris(return_X_y=True)
    params = {"objective": "multiclass", "num_class": 3, "verbose": -1, "num_threads": 1}
    booster = lightgbm.train(params, lightgbm.Dataset(x, label=y), num_boost_round=10)
    booster.save_model(str(_parent_made(path)))
    return path


def onnx_iris(path: Path) -> Path:
    """The iris LogisticRegression exported to ONNX with skl2onnx (label and probabilities)."""
    import numpy as np
    from skl2onnx import to_onnx
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    x, y = load_iris(return_X_y=True)
    model = LogisticRegression(max_iter=1000).fit(x, y)
    _parent_made(path).write_bytes(to_onnx(model, x[:1].astype(np.float32)).SerializeToString())
    return path


def torch_iris(path: Path) -> Path:
    """A linear torch module holding the iris LogisticRegression's weights (it answers logits):
    TorchScript for `.pt`, torch.export with a dynamic batch size for `.pt2`."""
    import torch
    from sklearn.datasets import load_iris
    from sklearn.linear_model import LogisticRegression

    model = LogisticRegression(max_iter=1000).fit(*load_iris(return_X_y=True))
    linear = torch.nn.Linear(4, 3)
    with torch.no_grad():
        linear.weight.copy_(torch.tensor(model.coef_, dtype=torch.float32))
        linear.bias.copy_(torch.tensor(model.intercept_, dtype=torch.float32))
    linear.eval()
    path = _parent_made(path)
    if path.suffix == ".pt2":
        batch = {0: torch.export.Dim.DYNAMIC}
        program = torch.export.export(linear, (torch.zeros(2, 4),), dynamic_shapes=(batch,))
        torch.export.save(program, str(path))
    else:
        with warnings.catch_warnings():  # torch 2.13 deprecates TorchScript; users still ship it
            warnings.simplefilter("ignore", DeprecationWarning)
            torch.jit.save(torch.jit.script(linear), str(path))
    return path


def mar_of(
    folder: Path, archive_path: Path, handler: str = "handler.py", serialized_file: str = ""
) -> Path:
    """A TorchServe `.mar` of a folder, built with `torch-model-archiver`: the handler (a file of
    the folder, or a TorchServe handler name), the serialized model file, the rest as extras."""
    folder, archive_path = Path(folder), _parent_made(archive_path)
    named = {handler, serialized_file}
    extras = [str(p) for p in sorted(folder.iterdir()) if p.is_file() and p.name not in named]
    command = [
        str(Path(sys.executable).with_name("torch-model-archiver")),
        *("--model-name", archive_path.name.removesuffix(".mar"), "--version", "1.0"),
        *("--handler", str(folder / handler) if (folder / handler).is_file() else handler),
        *("--export-path", str(archive_path.parent), "--force"),
    ]
    if serialized_file:
        command += ["--serialized-file", str(folder / serialized_file)]
    if extras:
        command += ["--extra-files", ",".join(extras)]
    subprocess.run(command, check=True, capture_output=True)
    return archive_path


def _dump(model: Any, path: Path) -> Path:
    path = _file_path(path)
    if hasattr(model, "n_jobs"):
        model.n_jobs = None  # a served model must not start a thread per core on each predict
    path.parent.mkdir(parents=True, exist_ok=True)
    joblib.dump(model, path)
    return path


def _file_path(path: Path) -> Path:
    path = Path(path)
    return path / "model.joblib" if path.is_dir() else path


def corrupt_artifact(path: Path, size_bytes: int = 4096, seed: int = 0) -> Path:
    """Random bytes under a `.joblib` name: loading it must fail cleanly."""
    path = _file_path(path)
    if path.suffix != ".joblib":
        path = path.with_name(path.name + ".joblib")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(random.Random(seed).randbytes(size_bytes))
    return path


# ---------------------------------------------------------------------------- handler folders

_BODY_PARSER = '''
def _body(request):
    """The request body as JSON, whichever form MMS hands it in (bytes, str, or decoded)."""
    body = request.get("body") if request.get("body") is not None else request.get("data")
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8")
    return json.loads(body) if isinstance(body, str) else body
'''

_MMS_HANDLER = (
    '''"""An MMS-style handler: loads model.joblib from model_dir on first call."""

import json
import os

import joblib
import numpy as np

_model = None

'''
    + _BODY_PARSER
    + """

def _rows(request):
    body = _body(request)
    if isinstance(body, dict):
        body = body.get("instances", body.get("inputs"))
    rows = np.asarray(body, dtype=float)
    return rows.reshape(1, -1) if rows.ndim == 1 else rows


def handle(data, context):
    global _model
    if _model is None:
        model_dir = context.system_properties["model_dir"]
        _model = joblib.load(os.path.join(model_dir, "model.joblib"))
    if data is None:  # MMS calls handle(None, context) once at load time
        return None
    return [
        {"predictions": _model.predict(_rows(request)).tolist(), "handler": "custom handler"}
        for request in data
    ]
"""
)

_SLOW_HANDLER = (
    '''"""An MMS-style handler that sleeps, so a test can kill its worker mid-call."""

import json
import time

SLEEP_FROM_BODY = {from_body}
FIXED_SLEEP_S = {fixed_sleep_s}

'''
    + _BODY_PARSER
    + """

def _sleep_s(request):
    if not SLEEP_FROM_BODY:
        return FIXED_SLEEP_S
    body = _body(request)
    return float(body.get("sleep", 0.0)) if isinstance(body, dict) else 0.0


def handle(data, context):
    if data is None:
        return None
    replies = []
    for request in data:
        seconds = _sleep_s(request)
        time.sleep(seconds)
        replies.append({{"slept": seconds}})
    return replies
"""
)

_GATED_HANDLER = '''"""An MMS handler that answers once its gate file exists, with its batch."""

import os
import time

GATE = {gate!r}
GIVE_UP_S = 60.0


def handle(data, context):
    if data is None:
        return None
    deadline = time.monotonic() + GIVE_UP_S
    while not os.path.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.005)
    return [{{"batch": len(data), "body": request["body"].decode()}} for request in data]
'''

_SAGEMAKER_MODEL_FN = '''"""SageMaker-style inference code; the container supplies the other _fn."""

import os

import joblib


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))
'''

_SAGEMAKER_FULL = """

def input_fn(request_body, request_content_type):
    if isinstance(request_body, (bytes, bytearray)):
        request_body = request_body.decode("utf-8")
    rows = json.loads(request_body)
    return [rows] if rows and not isinstance(rows[0], list) else rows


def predict_fn(input_data, model):
    return model.predict(input_data).tolist()


def output_fn(prediction, accept):
    return json.dumps({"predictions": prediction, "handler": "sagemaker"}), "application/json"
"""


def mms_handler_folder(path: Path) -> Path:
    """A folder with `model.joblib` (iris) and an MMS-style `handler.py` tagging its output."""
    path = Path(path)
    iris_logreg(_fresh_folder(path) / "model.joblib")
    (path / "handler.py").write_text(_MMS_HANDLER)
    return path


def slow_handler_folder(
    path: Path, sleep_s_param: bool = True, fixed_sleep_s: float = 60.0
) -> Path:
    """An MMS handler folder whose handle() sleeps, then returns `{"slept": s}`.

    With `sleep_s_param` it sleeps for the body's `{"sleep": 2.0}` (0 when absent); without,
    for `fixed_sleep_s` whatever the body says.
    """
    path = _fresh_folder(Path(path))
    source = _SLOW_HANDLER.format(from_body=bool(sleep_s_param), fixed_sleep_s=float(fixed_sleep_s))
    (path / "handler.py").write_text(source)
    return path


def gated_handler_folder(path: Path, gate: Path) -> Path:
    """An MMS handler folder whose handle() waits until `gate` exists (a test opens it by creating
    the file), then answers each request with `{"batch": len(data), "body": its body}`."""
    path = _fresh_folder(Path(path))
    (path / "handler.py").write_text(_GATED_HANDLER.format(gate=str(gate)))
    return path


def sagemaker_folder(path: Path, full: bool = False) -> Path:
    """A folder with `model.joblib` (iris) and `code/inference.py` defining `model_fn`.

    With `full`, inference.py also defines input_fn, predict_fn and output_fn (tagging the reply
    with `"handler": "sagemaker"`).
    """
    path = Path(path)
    iris_logreg(_fresh_folder(path) / "model.joblib")
    (path / "code").mkdir(exist_ok=True)
    source = _SAGEMAKER_MODEL_FN
    if full:
        source = source.replace("import os\n", "import json\nimport os\n") + _SAGEMAKER_FULL
    (path / "code" / "inference.py").write_text(source)
    return path


def _fresh_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------------------- archives


def tar_gz_of(folder: Path, archive_path: Path) -> Path:
    """A .tar.gz of the folder's contents, members relative to it (SageMaker's model.tar.gz)."""
    archive_path = _parent_made(archive_path)
    with tarfile.open(archive_path, "w:gz") as tar:
        for item in sorted(Path(folder).iterdir()):
            tar.add(item, arcname=item.name)
    return archive_path


def zip_of(folder: Path, archive_path: Path) -> Path:
    """A .zip of the folder's contents, members relative to it."""
    folder, archive_path = Path(folder), _parent_made(archive_path)
    with zipfile.ZipFile(archive_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in sorted(folder.rglob("*")):
            archive.write(item, item.relative_to(folder).as_posix())
    return archive_path


def traversal_tar(path: Path) -> Path:
    """A .tar.gz whose one member is `../escape.txt`."""
    data = b"this file escaped the model folder\n"
    return _tar_of_one(path, _member("../escape.txt", len(data)), io.BytesIO(data))


def symlink_tar(path: Path) -> Path:
    """A .tar.gz whose one member, `model.joblib`, is a symlink to /etc/passwd."""
    member = tarfile.TarInfo("model.joblib")
    member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return _tar_of_one(path, member, None)


def tar_bomb(path: Path, unpacked_bytes: int) -> Path:
    """A .tar.gz of one member, `model.joblib`, of `unpacked_bytes` zeros (streamed, not held)."""
    return _tar_of_one(path, _member("model.joblib", unpacked_bytes), _Zeros())


def _member(name: str, size: int) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = size, 0o644, int(time.time())
    return member


def _tar_of_one(path: Path, member: tarfile.TarInfo, data: Any) -> Path:
    path = _parent_made(path)
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        tar.addfile(member, data)
    return path


class _Zeros(io.RawIOBase):
    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        view[:] = bytes(len(view))
        return len(view)


def _parent_made(path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------------------- a running server


def serve_args(store: Path, cache_dir: Path, **settings: object) -> list[str]:
    """`modelhost serve` flags for a store and cache dir, plus settings by name (workers=2)."""
    flags = ["--model-store", str(store), "--cache-dir", str(cache_dir)]
    for name, value in settings.items():
        flags += [f"--{name.replace('_', '-')}", str(value)]
    return flags


class StepClock:
    """A clock for tests: each reading is one second after the last; move `now` to jump."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class RunningServer:
    """`python -m modelhost serve ARGS --host 127.0.0.1 --port P` in its own process group.

    Starts on `__enter__` (or `start()`), returns once `GET /ping` answers 200, and stops with
    SIGTERM on exit. `prefix` goes before the command (e.g. `("taskset", "-c", "1")`);
    `command` replaces `python -m modelhost serve` (benchmarks use it for other servers that
    take `--host`/`--port` and answer `/ping`). `tls`: the server speaks HTTPS, trusted by
    this context (its `url` is then https).
    """

    def __init__(
        self,
        args: Sequence[str],
        log_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
        command: Sequence[str] | None = None,
        startup_timeout_s: float = 60.0,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.port = free_port()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"server-{self.port}.log"
        base = list(command) if command else [sys.executable, "-m", "modelhost", "serve"]
        self.argv = [*prefix, *base, *args, "--host", "127.0.0.1", "--port", str(self.port)]
        self.env = dict(os.environ if env is None else env)
        self.startup_timeout_s = startup_timeout_s
        self.leaked_pids: list[int] = []  # processes of its group still alive after it exited
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self._started().pid

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> RunningServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        try:
            self._wait_ready()
        except BaseException:
            self._kill_group()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, wait up to `timeout`, SIGKILL the group if it is still there; the exit code."""
        process = self._started()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                self._kill_group()
        self.leaked_pids = self._group_pids()
        if self.leaked_pids:
            self._kill_group()
        return int(process.wait())

    def __enter__(self) -> RunningServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self.stop()

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout_s
        with httpx.Client(timeout=2.0, verify=self.tls or True) as client:
            while time.monotonic() < deadline:
                code = self._started().poll()
                if code is not None:
                    raise RuntimeError(self._failure(f"exited with code {code}"))
                try:
                    if client.get(f"{self.url}/ping").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        waited = f"did not answer /ping with 200 in {self.startup_timeout_s} s"
        raise RuntimeError(self._failure(waited))

    def _failure(self, what: str) -> str:
        tail = "\n".join(self.log_text().splitlines()[-40:])
        return f"server {' '.join(self.argv)} {what}; log {self.log_path} ends:\n{tail}"

    def _started(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("the server has not been started (use `with RunningServer(...)`)")
        return self._process

    def _group_pids(self) -> list[int]:
        import psutil

        pids = []
        for proc in psutil.process_iter():
            try:
                if os.getpgid(proc.pid) == self.pid and proc.status() != psutil.STATUS_ZOMBIE:
                    pids.append(proc.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        return pids

    def _kill_group(self) -> None:
        import psutil

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        self._started().wait()
        members = []
        for pid in self._group_pids():
            with contextlib.suppress(psutil.Error):
                members.append(psutil.Process(pid))
        psutil.wait_procs(members, timeout=5)  # orphans belong to init; wait until they are gone


def copy_artifact(source: Path, destination: Path) -> Path:
    """Copy a file or folder artifact (e.g. several store names for one forest)."""
    destination = _parent_made(destination)
    if Path(source).is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, destination)
    return destination
