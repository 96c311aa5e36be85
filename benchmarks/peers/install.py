"""Install the race's peers, one virtual environment each, and wrk.

    .venv/bin/python benchmarks/peers/install.py                 # every peer
    .venv/bin/python benchmarks/peers/install.py --peers mlserver

Venvs go to benchmarks/peers/.venvs/<peer> (git ignores it), or under $PEERS_VENVS. A venv whose
`.installed` stamp matches its requirements is skipped, so reruns cost nothing. scikit-learn is
pinned to the version of the Python running this script (the repo's venv, which trains the model
every peer loads), so no peer unpickles it with a different scikit-learn.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

PEERS_DIR = Path(__file__).resolve().parent
BENCHMARKS = PEERS_DIR.parent

# Why each pin: torch 2.13.0 is the local CPU wheel; TorchServe's worker imports yaml without
# declaring it; MMS 1.1.11 declares `future` itself; MLServer 1.7.1's workers call
# asyncio.get_event_loop(), which uvloop 0.22+ refuses ("There is no current event loop").
REQUIREMENTS = {
    "torchserve": [
        "torch==2.13.0",
        "torchserve==0.12.0",
        "torch-model-archiver==0.12.0",
        "pyyaml",
    ],
    "mms": ["multi-model-server==1.1.11", "model-archiver==1.0.3"],
    "mlserver": ["mlserver==1.7.1", "mlserver-sklearn==1.7.1", "uvloop<0.22"],
}


def venvs_root() -> Path:
    """Where the peers' venvs live: $PEERS_VENVS, else benchmarks/peers/.venvs."""
    return Path(os.environ.get("PEERS_VENVS", PEERS_DIR / ".venvs"))


def requirements(peer: str) -> list[str]:
    return [*REQUIREMENTS[peer], f"scikit-learn=={_sklearn_version()}", "joblib"]


def install(peer: str, root: Path) -> float:
    """Create or update `root/peer`; seconds spent (0 when its stamp says it is up to date)."""
    venv = root / peer
    stamp = venv / ".installed"
    wanted = json.dumps(requirements(peer))
    if stamp.exists() and stamp.read_text() == wanted:
        print(f"{peer}: up to date in {venv}")
        return 0.0
    started = time.monotonic()
    print(f"{peer}: installing {' '.join(requirements(peer))} into {venv}", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, *requirements(peer)], check=True)
    stamp.write_text(wanted)
    spent = time.monotonic() - started
    print(f"{peer}: installed in {spent:.0f} s", flush=True)
    return spent


def check_java() -> None:
    """TorchServe and MMS start a JVM; Java 17 works for both."""
    if not shutil.which("java"):
        sys.exit("java is missing: install a JDK 17 (apt-get install openjdk-17-jdk-headless)")


def _sklearn_version() -> str:
    import sklearn

    return sklearn.__version__


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--peers", nargs="+", default=list(REQUIREMENTS), choices=REQUIREMENTS)
    args = parser.parse_args()
    sys.path.insert(0, str(BENCHMARKS))
    from hot_path import ensure_wrk

    ensure_wrk()
    if {"torchserve", "mms"} & set(args.peers):
        check_java()
    root = venvs_root()
    root.mkdir(parents=True, exist_ok=True)
    spent = {peer: install(peer, root) for peer in args.peers}
    print("seconds spent: " + ", ".join(f"{peer} {s:.0f}" for peer, s in spent.items()))


if __name__ == "__main__":
    main()
