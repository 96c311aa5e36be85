"""scale-out.md's nginx steps, followed as written, give a configuration nginx accepts."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from fleet_tools import DEPLOY, require_nginx

DOC = Path(__file__).parents[2] / "docs" / "scale-out.md"


def documented_steps() -> list[str]:
    """The sh block under "nginx in front of N instances"."""
    section = DOC.read_text().split("## nginx in front of N instances", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "scale-out.md lost its nginx steps"
    return [line.split("#")[0].strip() for line in block[1].splitlines()]


def test_the_documented_nginx_steps_pass_nginx_t(tmp_path: Path) -> None:
    """The shipped nginx.conf includes the gRPC upstreams too: a user who edits only the files
    the steps name must still get a configuration nginx accepts."""
    binary = require_nginx()
    for step in documented_steps():
        if step.startswith("cp "):
            for shipped in [*DEPLOY.glob("*.conf"), *DEPLOY.glob("*.map")]:
                shutil.copy(shipped, tmp_path)
        elif step.startswith("$EDITOR "):
            edited = tmp_path / Path(step.split()[1]).name
            edited.write_text("server 127.0.0.1:18080 max_fails=1 fail_timeout=10s;\n")
    conf = tmp_path / "nginx.conf"
    args = ["-t", "-c", str(conf), "-p", str(tmp_path), "-e", "stderr"]
    done = subprocess.run(
        [binary, *args, "-g", f"pid {tmp_path}/nginx.pid;"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
