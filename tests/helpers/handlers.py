"""Handlers tests hold: one that answers only once the test opens its gate, and stores of one
`.mar` of a handler of their own."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelhost import testing

_GATED_HANDLER = '''"""An MMS handler that answers once its gate file exists, with its batch."""

import os
import time

GATE = {gate!r}
GATES_LOAD = {gates_load!r}
GIVE_UP_S = 60.0


def wait_at_the_gate():
    deadline = time.monotonic() + GIVE_UP_S
    while not os.path.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.005)


if GATES_LOAD:  # the load imports this file
    wait_at_the_gate()


def handle(data, context):
    if data is None:
        return None
    wait_at_the_gate()
    return [{{"batch": len(data), "body": request["body"].decode()}} for request in data]
'''


def gated_handler_folder(path: Path, gate: Path, gates_load: bool = False) -> Path:
    """An MMS handler folder whose handle() waits until `gate` exists (a test opens it by creating
    the file), then answers each request with `{"batch": len(data), "body": its body}`.
    With `gates_load` its load waits for the gate too."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    (path / "handler.py").write_text(_GATED_HANDLER.format(gate=str(gate), gates_load=gates_load))
    return path


def handler_store(folders: pytest.TempPathFactory, archive: str, handler: str) -> Path:
    """A store of one `.mar`, `archive`, whose handler is the module source `handler`."""
    pytest.importorskip("ts", reason="pip install 'modelhost[torchserve-handlers]'")
    root = folders.mktemp(archive.removesuffix(".mar"))
    (root / ".src").mkdir()
    (root / ".src/handler.py").write_text(handler)
    testing.mar_of(root / ".src", root / archive)
    return root
