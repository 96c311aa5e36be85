"""`modelhost bench` through the shipped nginx config in front of three `serve --workers 1`
instances on loopback (60 iris models, Zipf popularity): bench works unchanged through the
router, and the figures are the fleet's.

    python benchmarks/fleet_bench.py [--users 4] [--duration 8]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "tests" / "fleet"))
from fleet_tools import RunningNginx  # noqa: E402

from modelhost import testing  # noqa: E402

MODELS = [f"tenants/t{i:03d}.joblib" for i in range(60)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--duration", type=float, default=8.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fleet-bench-") as folder:
        work = Path(folder)
        trained = testing.iris_logreg(work / "store/.src/iris.joblib")
        for model in MODELS:
            testing.copy_artifact(trained, work / "store" / model)
        servers = [
            testing.RunningServer(
                testing.serve_args(
                    work / "store", work / f"cache{i}", workers=1, instance_id=f"fleet-{i}"
                ),
                work,
            )
            for i in range(3)
        ]
        try:
            for server in servers:
                server.start()
            lines = [f"127.0.0.1:{s.port}" for s in servers]
            with RunningNginx(work / "nginx", lines) as router:
                bench = [sys.executable, "-m", "modelhost", "bench", router.url]
                bench += ["--models", ",".join(MODELS), "--popularity", "zipf"]
                bench += ["-c", str(options.users), "--duration", str(options.duration)]
                subprocess.run([*bench, "--quiet", "--out", str(work / "bench")], check=True)
        finally:
            for server in servers:
                server.stop()


if __name__ == "__main__":
    main()
