"""What the fleet tests share: the shipped nginx config running in front of loopback instances,
and a bounded load of invocations that records who answered each."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import struct
import subprocess
import threading
import time
import zlib
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from helpers.missing import missing

from modelhost import testing
from modelhost.toolkit.simulate.ring import split_server

DEPLOY = Path(__file__).parents[2] / "deploy" / "nginx"
SHIPPED = ("modelhost.conf", "modelhost-hot-models.map")
INSTANCE = "x-modelhost-instance"
IRIS_ROW = [[5.1, 3.5, 1.4, 0.2]]


def iris_store(root: Path, models: Iterable[str]) -> Path:
    """A store of `models`, each a copy of one iris LogisticRegression."""
    trained = testing.iris_logreg(root / ".src/iris.joblib")
    for model in models:
        testing.copy_artifact(trained, root / model)
    return root


def instance(store: Path, work: Path, index: int, **settings: object) -> testing.RunningServer:
    """Instance `fleet-{index}` of a fleet: one worker, 1 GiB, its own cache under `work`."""
    args = testing.serve_args(
        store,
        work / f"i{index}/cache",
        workers=1,
        memory_budget="1GiB",
        instance_id=f"fleet-{index}",
        **settings,
    )
    return testing.RunningServer(args, work / f"i{index}")


@contextlib.contextmanager
def running(servers: Sequence[testing.RunningServer]) -> Iterator[None]:
    """Every server started, and stopped on the way out, even one a test killed."""
    with contextlib.ExitStack() as stack:
        for server in servers:
            stack.enter_context(server)
        yield


def require_nginx() -> str:
    """nginx's path; skips without it, fails under CI's REQUIRE_TEST_TOOLS=1."""
    path = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/sbin/nginx") if os.access(p, os.X_OK)), None
    )
    if path:
        return path
    missing("nginx is not installed (Debian package nginx-light); scripts/install-test-tools.sh")


class RunningNginx:
    """The shipped deploy/nginx config, unchanged but for the listen address and the server list
    (each server out for `fail_timeout_s` after a failure, the shipped 10 s by default), in a
    folder of its own, run in the foreground until `stop()`."""

    def __init__(
        self, work: Path, servers: Sequence[str], hot_models: str = "", fail_timeout_s: int = 10
    ) -> None:
        self.binary = require_nginx()
        self.work, self.fail_timeout_s = work, fail_timeout_s
        self.port = testing.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        work.mkdir(parents=True, exist_ok=True)
        for name in SHIPPED:
            shutil.copyfile(DEPLOY / name, work / name)
        self.place("modelhost.conf", "listen 8080;", self.port, servers, "modelhost-servers.conf")
        if hot_models:
            (work / "modelhost-hot-models.map").write_text(hot_models)
        (work / "nginx.conf").write_text(self._main_conf())
        self._process: subprocess.Popen[bytes] | None = None

    def place(
        self, conf: str, listen: str, port: int, servers: Sequence[str], servers_conf: str
    ) -> None:
        """A shipped config listening on `port` of loopback instead of its `listen` line's,
        its upstream's server list written beside it."""
        text = (DEPLOY / conf).read_text()
        assert text.count(listen) == 1
        default = listen.split()[1].rstrip(";")
        (self.work / conf).write_text(
            text.replace(listen, listen.replace(default, f"127.0.0.1:{port}"))
        )
        lines = [f"server {s} max_fails=1 fail_timeout={self.fail_timeout_s}s;" for s in servers]
        (self.work / servers_conf).write_text("\n".join(lines) + "\n")

    def _main_conf(self) -> str:
        temp = "\n".join(
            f"    {kind}_temp_path {self.work / kind};"
            for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        user = "user root;\n" if os.geteuid() == 0 else ""  # workers must reach the temp paths
        return (
            f"{user}daemon off;\nworker_processes 1;\npid {self.work}/nginx.pid;\n"
            f"error_log {self.work}/error.log warn;\nevents {{ worker_connections 1024; }}\n"
            f"http {{\n    access_log off;\n{temp}\n    include modelhost.conf;\n}}\n"
        )

    def start(self) -> RunningNginx:
        conf = str(self.work / "nginx.conf")
        check = subprocess.run(
            [self.binary, "-t", "-p", str(self.work), "-c", conf], capture_output=True
        )
        assert check.returncode == 0, check.stderr.decode()
        with open(self.work / "stdout.log", "ab") as log:
            self._process = subprocess.Popen(
                [self.binary, "-p", str(self.work), "-c", conf],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/ping", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError(f"nginx did not answer; {self.error_log()}")

    def error_log(self) -> str:
        path = self.work / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self._process is None:
            return
        if self._process.poll() is None:
            self._process.send_signal(signal.SIGQUIT)  # nginx's graceful stop
            try:
                self._process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait()

    def __enter__(self) -> RunningNginx:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def invoke(client: httpx.Client, model: str, route: int = 0) -> httpx.Response:
    """An invocation through one of the three ways of naming the model."""
    if route % 3 == 0:
        return client.post(f"/models/{model}/invoke", json=IRIS_ROW)
    if route % 3 == 1:
        headers = {"X-Amzn-SageMaker-Target-Model": model}
        return client.post("/invocations", json=IRIS_ROW, headers=headers)
    return client.post(f"/predictions/{model}", json=IRIS_ROW)


@dataclass
class Answer:
    model: str
    status: int  # 0: the request itself failed (no response)
    instance: str
    sent_at: float
    error: str = ""  # why no response came


@dataclass
class Load:
    """`users` threads invoking `models` round-robin through `url` until stopped or `max_requests`
    are answered, recording every answer (status 0: no response at all).

    With `retry_resets`, a request whose idle keep-alive connection nginx reset while reloading is
    sent once more, as botocore does and RFC 9112 9.3.1 allows: nginx never read it."""

    url: str
    models: Sequence[str]
    users: int = 4
    max_requests: int = 5000
    pause_s: float = 0.005  # between one user's requests: a steady load that leaves cores spare
    retry_resets: bool = False
    answers: list[Answer] = field(default_factory=list)
    resets: int = 0  # requests sent again after a reset
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._threads = [threading.Thread(target=self._user, args=(u,)) for u in range(self.users)]

    def start(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> list[Answer]:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
        return self.answers

    def wait_for(self, count: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        count = min(count, self.max_requests)
        while len(self.answers) < count and time.monotonic() < deadline:
            time.sleep(0.02)

    def wait_for_instance(self, instance: str, since: int, timeout_s: float = 60) -> bool:
        """Whether an answer after the first `since` came from `instance` within the time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(self.answers) < self.max_requests:
            if any(a.instance == instance for a in self.answers[since:]):
                return True
            time.sleep(0.1)
        return False

    def _user(self, user: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30) as client:
            n = user
            while not self._stop.is_set() and len(self.answers) < self.max_requests:
                model = self.models[n % len(self.models)]
                answer = self._send(client, model, n // len(self.models))
                with self._lock:
                    self.answers.append(answer)
                n += self.users
                time.sleep(self.pause_s)

    def _send(self, client: httpx.Client, model: str, route: int) -> Answer:
        sent_at = time.monotonic()
        for attempt in (1, 2):
            try:
                response = invoke(client, model, route)
                return Answer(
                    model, response.status_code, response.headers.get(INSTANCE, ""), sent_at
                )
            except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError) as error:
                failure = repr(error)  # a reset, while writing the request or awaiting its answer
                if not self.retry_resets or attempt == 2:
                    break
                with self._lock:
                    self.resets += 1
            except httpx.TransportError as error:
                failure = repr(error)
                break
        return Answer(model, 0, "", sent_at, failure)


def brute_force_server(servers: list[str], key: str, down: Collection[str] = ()) -> str:
    """ngx_http_upstream_update_chash and get_chash_peer, transcribed loop for loop."""
    points = []
    for server in servers:
        host, port = split_server(server)
        previous = 0
        for _ in range(160):
            previous = zlib.crc32(host + b"\0" + port + struct.pack("<I", previous))
            points.append((previous, server))
    points.sort(key=lambda p: p[0])
    unique = [p for i, p in enumerate(points) if i == 0 or p[0] != points[i - 1][0]]
    wanted = zlib.crc32(key.encode())
    index = next((i for i, (h, _) in enumerate(unique) if h >= wanted), len(unique))
    for step in range(21):
        server = unique[(index + step) % len(unique)][1]
        if server not in down:
            return server
    raise AssertionError("no server within 20 steps")
