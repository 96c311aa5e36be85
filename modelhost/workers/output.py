"""A sandboxed worker's stdout and stderr, sent to the frontend as `Output` replies."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from modelhost.workers.messages import Output

CHUNK_BYTES = 65_536  # an Output's most


def captured() -> int:
    """Point stdout and stderr at a new pipe; return its read end."""
    read, write = os.pipe()
    for stream in (1, 2):
        os.dup2(write, stream)
    os.close(write)
    return read


def relay(read: int, send: Callable[[Output], None]) -> None:
    """Send what the pipe brings, in whole lines where they fit, from a thread."""
    threading.Thread(target=_relay, args=(read, send), name="output", daemon=True).start()


def _relay(read: int, send: Callable[[Output], None]) -> None:
    held = b""
    while chunk := os.read(read, CHUNK_BYTES):
        held += chunk
        while len(held) >= CHUNK_BYTES:
            send(Output(held[:CHUNK_BYTES].decode(errors="replace")))
            held = held[CHUNK_BYTES:]
        end = held.rfind(b"\n") + 1
        if end:
            send(Output(held[:end].decode(errors="replace")))
            held = held[end:]
