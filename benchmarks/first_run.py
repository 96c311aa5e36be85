"""First run: from a clean clone to the first answer of `make serve`.

Clones the repository (its committed HEAD) into a temporary folder, runs `make serve PORT=P` there
(a fresh .venv, the example store, the server), and POSTs the README's first invocation every
0.2 s until it answers 200. Reports the seconds until make starts `modelhost examples` (the
install done), until its "N models in" line (the store built) and until that first answer, then
stops `make` and everything it started. Bounded:
it gives up after --timeout-s. Pip's cache and the machine's local wheels stay as they are, so
this is a new user's first run on a machine that has installed these packages before.

    python3 benchmarks/first_run.py [--repo .] [--timeout-s 900] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

MODEL = "tenants/t000/churn.joblib"
BODY = b"[5.1, 3.5, 1.4, 0.2]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--keep", action="store_true", help="leave the clone in place")
    options = parser.parse_args()
    clone = Path(tempfile.mkdtemp(prefix="first-run-")) / "modelhost"
    subprocess.run(["git", "clone", "--quiet", options.repo, str(clone)], check=True)
    try:
        print(json.dumps(first_run(clone, options.timeout_s), indent=2))
    finally:
        if not options.keep:
            shutil.rmtree(clone.parent, ignore_errors=True)


def first_run(clone: Path, timeout_s: float) -> dict[str, object]:
    port = free_port()
    log_path = clone.parent / "make-serve.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        make = subprocess.Popen(
            ["make", "serve", f"PORT={port}"],
            cwd=clone,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        seen_s = wait_for_answer(make, log_path, port, started, timeout_s)
    finally:
        stop(make)
    return {"commit": git_head(clone), **seen_s, "log": str(log_path)}


MARKERS = {"installed_s": b"modelhost examples", "store_built_s": b" models in "}


def wait_for_answer(
    make: subprocess.Popen[bytes], log_path: Path, port: int, started: float, timeout_s: float
) -> dict[str, float]:
    """Seconds from `started` to each marker's first line in the log, and to the first 200."""
    seen_s: dict[str, float] = {}
    url = f"http://127.0.0.1:{port}/models/{MODEL}/invoke"
    while time.monotonic() - started < timeout_s:
        if make.poll() is not None:
            tail = log_path.read_text(errors="replace")[-3000:]
            raise SystemExit(f"make serve exited with {make.returncode}:\n{tail}")
        log = log_path.read_bytes()
        for name, marker in MARKERS.items():
            if name not in seen_s and marker in log:
                seen_s[name] = round(time.monotonic() - started, 1)
        if answers(url):
            return {**seen_s, "first_answer_s": round(time.monotonic() - started, 1)}
        time.sleep(0.2)
    raise SystemExit(f"no answer from {url} in {timeout_s} s; log: {log_path}")


def answers(url: str) -> bool:
    request = urllib.request.Request(url, data=BODY, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def stop(make: subprocess.Popen[bytes]) -> None:
    """SIGTERM to make's process group (make, the server and its workers), SIGKILL after 30 s."""
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(make.pid, signal.SIGTERM)
    try:
        make.wait(30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):  # the group is gone already
            os.killpg(make.pid, signal.SIGKILL)
        make.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def git_head(clone: Path) -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True)
    return done.stdout.decode().strip()


if __name__ == "__main__":
    main()
