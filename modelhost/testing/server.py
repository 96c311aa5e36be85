"""A modelhost server running in a subprocess on a free loopback port, and a test clock."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from modelhost.records.events import events_in
from modelhost.testing.models import parent_made

# ---------------------------------------------------------------------------- a running server


def serve_args(store: Path | str, cache_dir: Path, **settings: object) -> list[str]:
    """`modelhost serve` flags for a store and cache dir, plus settings by name."""
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


FREE_PORTS = range(10_000, 32_768)  # below Linux's ephemeral range: no client socket takes one
_PICK = random.SystemRandom()  # a test seeding `random` must not make two picks alike
_handed_out: set[int] = set()  # a port picked but not yet bound is still free to a probe


def free_port() -> int:
    """A loopback port no one holds, outside the range the kernel hands to port 0 and clients.

    Never the same port twice in one process.
    """
    while True:
        port = _PICK.choice(FREE_PORTS)
        if port in _handed_out:
            continue
        with socket.socket() as sock, contextlib.suppress(OSError):
            sock.bind(("127.0.0.1", port))
            _handed_out.add(port)
            return port


def wait_listening(port: int, process: subprocess.Popen[bytes], timeout_s: float = 30.0) -> None:
    """Until something listens on loopback `port`; raises if `process` exits first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"{process.args!r} exited with {process.returncode} before it listened"
            )
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port} after {timeout_s:g} s")


def _written_text(path: Path) -> str:
    """Up to the last newline: a read may see a write half done."""
    text = path.read_text(errors="replace") if path.exists() else ""
    return text[: text.rfind("\n") + 1]


def json_lines(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON-lines file another process is writing."""
    return [json.loads(line) for line in _written_text(path).splitlines()]


class RunningServer:
    """`python -m modelhost serve ARGS` on loopback in its own process group.

    Ready once `GET /ping` answers 200 (with `until_healthy` false: answers at all), stopped
    with SIGTERM. `prefix` goes before the command (taskset, say), `command` replaces it for
    other servers, and `tls` trusts their HTTPS.
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
        cwd: Path | None = None,
        until_healthy: bool = True,
    ) -> None:
        self.port = free_port()
        self.cwd = cwd  # `python -m` imports from here first
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self.log_path = Path(log_dir) / f"server-{self.port}.log"
        base = list(command) if command else [sys.executable, "-m", "modelhost", "serve"]
        self.argv = [*prefix, *base, *args, "--host", "127.0.0.1", "--port", str(self.port)]
        self.env = dict(os.environ if env is None else env)
        self.startup_timeout_s = startup_timeout_s
        self.until_healthy = until_healthy
        self.leaked_pids: list[int] = []  # of its group, alive after it exited
        self._process: subprocess.Popen[bytes] | None = None
        self._stopped = False  # since the last start()

    @property
    def pid(self) -> int:
        return self._started().pid

    def log_text(self) -> str:
        return _written_text(self.log_path)

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """The events its log holds, of one kind if given."""
        events = events_in(self.log_text().splitlines())
        return [event for event in events if kind is None or event["kind"] == kind]

    def start(self) -> RunningServer:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self._process = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self._stopped = False
        try:
            self._wait_ready()
        except BaseException:
            self._kill_group()
            raise
        return self

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM, then SIGKILL the group after `timeout`; the exit code. Idempotent."""
        process = self._started()
        if self._stopped:
            return int(process.wait())
        self._stopped = True
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

    def __exit__(self, *exc: object) -> None:
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
                    if client.get(f"{self.url}/ping").status_code == 200 or not self.until_healthy:
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
        psutil.wait_procs(members, timeout=5)  # orphans belong to init


def copy_artifact(source: Path, destination: Path) -> Path:
    destination = parent_made(destination)
    if Path(source).is_dir():
        shutil.copytree(source, destination, dirs_exist_ok=True)
    else:
        shutil.copyfile(source, destination)
    return destination
