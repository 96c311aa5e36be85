from __future__ import annotations

import random
import socket
import sys
import tarfile
import textwrap
import types
import zipfile
from pathlib import Path

import joblib
import psutil
import pytest
from helpers.archives import symlink_tar, tar_bomb, traversal_tar

from modelhost import testing
from modelhost.workers.handlers import import_user_module


def test_iris_logreg_predicts_iris_rows(tmp_path: Path) -> None:
    path = testing.iris_logreg(tmp_path / "iris.joblib")
    assert joblib.load(path).predict(testing.iris_rows(3)).tolist() == [0, 0, 0]


def test_iris_rows_cycle_past_the_data_set() -> None:
    rows = testing.iris_rows(151)
    assert len(rows) == 151 and rows[150] == rows[0] and len(rows[0]) == 4


def test_a_directory_gets_model_joblib_inside(tmp_path: Path) -> None:
    assert testing.iris_logreg(tmp_path) == tmp_path / "model.joblib"


@pytest.mark.parametrize("target_bytes", [2 * 2**20, 15 * 2**20])
def test_random_forest_lands_near_its_target_size(tmp_path: Path, target_bytes: int) -> None:
    path = testing.random_forest(tmp_path / "forest.joblib", target_bytes)
    assert 0.7 * target_bytes <= path.stat().st_size <= 1.3 * target_bytes
    forest = joblib.load(path)
    assert forest.n_jobs is None
    assert len(forest.predict(testing.digits_rows(2))) == 2


def test_random_forest_seed_changes_the_forest(tmp_path: Path) -> None:
    a = testing.random_forest(tmp_path / "a.joblib", 2**20, seed=0).read_bytes()
    b = testing.random_forest(tmp_path / "b.joblib", 2**20, seed=1).read_bytes()
    assert a != b


def test_corrupt_artifact_fails_to_load(tmp_path: Path) -> None:
    path = testing.corrupt_artifact(tmp_path / "bad")
    assert path.name == "bad.joblib"
    with pytest.raises(Exception):  # noqa: B017 - any failure is right, as long as it raises
        joblib.load(path)


def test_mms_handler_folder_serves_predictions(tmp_path: Path) -> None:
    folder = testing.mms_handler_folder(tmp_path / "custom")
    handle, context = _handler(folder)
    replies = handle(
        [{"body": bytearray(b"[5.1, 3.5, 1.4, 0.2]")}, {"data": [[6.3, 3.3, 6, 2.5]]}], context
    )
    assert replies == [
        {"predictions": [0], "handler": "custom handler"},
        {"predictions": [2], "handler": "custom handler"},
    ]


def test_slow_handler_sleeps_for_the_body_value(tmp_path: Path) -> None:
    handle, context = _handler(testing.slow_handler_folder(tmp_path / "slow"))
    assert handle(None, context) is None
    assert handle([{"body": b'{"sleep": 0.01}'}, {"body": {}}], context) == [
        {"slept": 0.01},
        {"slept": 0.0},
    ]


def test_slow_handler_can_ignore_the_body(tmp_path: Path) -> None:
    folder = testing.slow_handler_folder(tmp_path / "slow", sleep_s_param=False, fixed_sleep_s=0.01)
    handle, context = _handler(folder)
    assert handle([{"body": b'{"sleep": 100}'}], context) == [{"slept": 0.01}]


@pytest.mark.parametrize("full", [False, True])
def test_sagemaker_folder(tmp_path: Path, full: bool) -> None:
    folder = testing.sagemaker_folder(tmp_path / "sm", full=full)
    code = import_user_module(folder / "code" / "inference.py")
    model = code.model_fn(str(folder))
    assert hasattr(code, "predict_fn") is full
    if full:
        rows = code.input_fn(b"[5.1, 3.5, 1.4, 0.2]", "application/json")
        body, content_type = code.output_fn(code.predict_fn(rows, model), "application/json")
        assert body == '{"predictions": [0], "handler": "sagemaker"}'


def test_tar_gz_and_zip_hold_the_folder_contents(tmp_path: Path) -> None:
    folder = testing.sagemaker_folder(tmp_path / "sm")
    tar_path = testing.tar_gz_of(folder, tmp_path / "out" / "model.tar.gz")
    zip_path = testing.zip_of(folder, tmp_path / "out" / "model.zip")
    with tarfile.open(tar_path) as archive:
        assert sorted(archive.getnames()) == ["code", "code/inference.py", "model.joblib"]
    with zipfile.ZipFile(zip_path) as archive:
        assert sorted(archive.namelist()) == ["code/", "code/inference.py", "model.joblib"]


def test_traversal_tar_member_escapes(tmp_path: Path) -> None:
    with tarfile.open(traversal_tar(tmp_path / "t.tar.gz")) as archive:
        [member] = archive.getmembers()
    assert member.name == "../escape.txt" and member.isfile()


def test_symlink_tar_member_links_out(tmp_path: Path) -> None:
    with tarfile.open(symlink_tar(tmp_path / "s.tar.gz")) as archive:
        [member] = archive.getmembers()
    assert member.issym() and member.linkname == "/etc/passwd"


def test_tar_bomb_unpacks_far_larger_than_it_is(tmp_path: Path) -> None:
    path = tar_bomb(tmp_path / "b.tar.gz", 64 * 2**20)
    with tarfile.open(path) as archive:
        [member] = archive.getmembers()
        assert member.size == 64 * 2**20
        assert archive.extractfile(member).read(4096) == bytes(4096)  # type: ignore[union-attr]
    assert path.stat().st_size < 2**20


def test_free_port_can_be_bound_and_is_not_one_the_kernel_hands_out() -> None:
    port = testing.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))
    low, _ = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    assert port < int(low)


def test_free_port_hands_out_each_port_once_though_random_is_reseeded() -> None:
    ports = []
    for _ in range(20):
        random.seed(0)  # as a test's own seeding might
        ports.append(testing.free_port())
    assert len(set(ports)) == len(ports)


# ---------------------------------------------------------------------------- RunningServer

FAKE_SERVER = """
import argparse, http.server, signal, subprocess, sys
parser = argparse.ArgumentParser()
for flag in ("--host", "--port", "--mode"):
    parser.add_argument(flag)
args = parser.parse_args()
print("starting in mode", args.mode, flush=True)
if args.mode == "fail":
    sys.exit(3)
if args.mode == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if args.mode == "leaky":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

class Ping(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/ping" else 404)
        self.end_headers()

http.server.HTTPServer((args.host, int(args.port)), Ping).serve_forever()
"""


def _fake(tmp_path: Path, mode: str, **kwargs: float) -> testing.RunningServer:
    script = tmp_path / "fake_server.py"
    script.write_text(textwrap.dedent(FAKE_SERVER))
    command = [sys.executable, str(script)]
    return testing.RunningServer(["--mode", mode], tmp_path, command=command, **kwargs)


def test_running_server_starts_answers_and_stops(tmp_path: Path) -> None:
    with _fake(tmp_path, "plain") as server:
        assert server.url == f"http://127.0.0.1:{server.port}"
        assert psutil.pid_exists(server.pid)
        assert "starting in mode plain" in server.log_text()
        assert server.stop() == -15
    assert server.leaked_pids == []


def test_running_server_raises_with_the_log_when_it_exits(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"exited with code 3(.|\n)*starting in mode fail"):
        _fake(tmp_path, "fail").start()


def test_running_server_kills_the_group_when_sigterm_is_ignored(tmp_path: Path) -> None:
    server = _fake(tmp_path, "stubborn").start()
    assert server.stop(timeout=0.5) == -9


def test_running_server_reports_and_kills_leaked_children(tmp_path: Path) -> None:
    server = _fake(tmp_path, "leaky").start()
    child = psutil.Process(server.pid).children()[0]
    server.stop()
    assert server.leaked_pids == [child.pid]
    assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE


def test_running_server_builds_the_modelhost_command(tmp_path: Path) -> None:
    server = testing.RunningServer(["--workers", "1"], tmp_path, prefix=["taskset", "-c", "1"])
    assert server.argv[:6] == ["taskset", "-c", "1", sys.executable, "-m", "modelhost"]
    assert server.argv[6:] == [
        "serve",
        "--workers",
        "1",
        "--host",
        "127.0.0.1",
        "--port",
        str(server.port),
    ]


def _handler(folder: Path) -> tuple[types.FunctionType, types.SimpleNamespace]:
    context = types.SimpleNamespace(system_properties={"model_dir": str(folder)})
    return import_user_module(folder / "handler.py").handle, context


def test_testing_exports_what_its_modules_define() -> None:
    """`modelhost.testing` names its helpers: what its modules define, not what they import."""
    modules = [testing.archives, testing.handlers, testing.models, testing.server]
    defined = {
        name
        for module in modules
        for name, value in vars(module).items()
        if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
    }
    assert sorted(testing.__all__) == sorted(defined)
    star: dict[str, object] = {}
    exec("from modelhost.testing import *", star)  # noqa: S102  (what a user's star import gets)
    assert set(star) - {"__builtins__"} == defined


def test_a_server_log_is_read_in_whole_lines(tmp_path: Path) -> None:
    """A reader can see a write half done: a line still being written is not read yet."""
    server = testing.RunningServer(["--store", str(tmp_path)], tmp_path)
    server.log_path.write_text('{"kind":"load","model":"a"}\n{"kind":"load","detail":{"x":1}')
    assert server.events() == [{"kind": "load", "model": "a"}]
    log = tmp_path / "access.jsonl"
    log.write_text('{"model":"a"}\n{"model":"b"}\n{"mo')
    assert testing.json_lines(log) == [{"model": "a"}, {"model": "b"}]
    assert testing.json_lines(tmp_path / "not-yet.jsonl") == []
