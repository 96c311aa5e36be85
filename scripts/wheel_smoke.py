"""The package as users install it: build the sdist and wheel, install the wheel into a fresh venv
(its dependencies from the index, as `pip install modelhost` gets them), and try it from outside
the checkout: a toolkit command without the toolkit says what to install; the example store is
served on a free loopback port, invoked, its dashboard and metrics read; then with the toolkit
installed, `modelhost bench` runs for 2 s against it. Standard library only; every wait bounded.

    .venv/bin/python scripts/wheel_smoke.py          (`make wheel-smoke`; CI runs it)
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "tenants/t000/churn.joblib"
TOOLKIT_HINT = "pip install 'modelhost[toolkit]'"


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="wheel-smoke-") as tmp:
        work = Path(tmp)
        wheel = build(work / "dist")
        bin_dir = install(work / "venv", wheel)
        toolkit_missing_is_one_line(bin_dir, work)
        port = free_port()
        step(f"examples, then serve on 127.0.0.1:{port}")
        examples = ["examples", "store", "--tenants", "2", "--port", str(port)]
        run(bin_dir / "modelhost", *examples, cwd=work)
        server = start_server(bin_dir, work, port)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_ready(base, server)
            check_server(base)
            step("install the toolkit extra; bench for 2 s")
            pip(work / "venv", f"{wheel}[toolkit]")
            bench(bin_dir, work, base)
        except SystemExit:
            print((work / "server.log").read_text(errors="replace")[-4000:], file=sys.stderr)
            raise
        finally:
            stop(server)
    step("wheel smoke: ok")
    return 0


def step(text: str) -> None:
    print(f"wheel-smoke: {text}", flush=True)


def run(*argv: object, cwd: Path = ROOT, timeout_s: float = 600) -> str:
    done = subprocess.run(
        [str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=timeout_s
    )
    if done.returncode != 0:
        raise SystemExit(f"{argv} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def build(out: Path) -> Path:
    step("python -m build (sdist, then the wheel from it)")
    run(sys.executable, "-m", "build", "--outdir", out, ROOT)
    [wheel] = out.glob("modelhost-*.whl")
    [_sdist] = out.glob("modelhost-*.tar.gz")
    return wheel


def install(venv: Path, wheel: Path) -> Path:
    step(f"fresh venv; pip install {wheel.name} (no extra)")
    run(sys.executable, "-m", "venv", venv)
    pip(venv, wheel)
    return venv / "bin"


def pip(venv: Path, requirement: object) -> None:
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", requirement)


def toolkit_missing_is_one_line(bin_dir: Path, work: Path) -> None:
    step("modelhost cost without the toolkit")
    argv = [str(bin_dir / "modelhost"), "cost", "--throughput", "10"]
    done = subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=60)
    lines = done.stderr.splitlines()
    if done.returncode != 2 or len(lines) != 1 or TOOLKIT_HINT not in lines[0]:
        raise SystemExit(f"expected exit 2 and one line naming the toolkit, got {done}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(bin_dir: Path, work: Path, port: int) -> subprocess.Popen[bytes]:
    argv = [bin_dir / "modelhost", "serve", "--model-store", "store", "--port", str(port)]
    log = open(work / "server.log", "wb")  # noqa: SIM115 - the server writes it until stopped
    return subprocess.Popen(
        [*map(str, argv), "--workers", "1", "--cache-dir", "cache"],
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def wait_ready(base: str, server: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        try:
            if get(f"{base}/ping")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit(f"the server did not answer /ping in {timeout_s} s")


def get(url: str, body: bytes | None = None, accept: str = "*/*") -> tuple[int, str]:
    headers = {"Content-Type": "application/json"} if body is not None else {}
    headers["Accept"] = accept
    request = urllib.request.Request(url, data=body, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def check_server(base: str) -> None:
    step("invoke, GET /, GET /metrics")
    status, text = get(f"{base}/models/{MODEL}/invoke", b"[5.1, 3.5, 1.4, 0.2]")
    expect(status == 200 and json.loads(text) == {"predictions": [0]}, "invoke", status, text)
    status, text = get(f"{base}/", accept="text/html")  # a browser's; else KServe's liveness
    expect(status == 200 and "<html" in text.lower(), "GET /", status, text[:200])
    status, text = get(f"{base}/metrics")
    expect(status == 200 and "modelhost_" in text, "GET /metrics", status, text[:200])


def bench(bin_dir: Path, work: Path, base: str) -> None:
    out = work / "bench-out"
    run(
        bin_dir / "modelhost", "bench", base, "--models", MODEL, "--concurrency", "2",
        "--duration", "2", "--warmup", "0.5", "--processes", "1", "--quiet", "--out", out,
        cwd=work,
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    requests = summary["requests"]
    step(f"bench: {requests}, {summary['throughput_rps']} requests/s")
    expect(requests["ok"] > 0 and not requests["errors"], "bench", 0, json.dumps(requests))
    expect((out / "report.html").exists(), "bench report.html", 0, str(list(out.iterdir())))


def expect(ok: bool, what: str, status: int, text: str) -> None:
    if not ok:
        raise SystemExit(f"{what}: unexpected answer {status}: {text}")


def stop(server: subprocess.Popen[bytes]) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(10)


if __name__ == "__main__":
    sys.exit(main())
