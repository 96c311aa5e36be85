"""A front process stays light: it answers hits without importing the main process's parts."""

from __future__ import annotations

import subprocess
import sys

MAIN_PROCESS_ONLY = (
    "modelhost.host",
    "modelhost.http.app",
    "modelhost.http.invocations",
    "modelhost.http.oip",
    "modelhost.http.torchserve",
    "starlette.routing",
)


def test_a_front_imports_neither_the_host_nor_the_routes() -> None:
    code = "import sys, modelhost.fronts.front, modelhost.fronts.direct; print(*sys.modules)"
    imported = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert set(MAIN_PROCESS_ONLY) & set(imported) == set()
