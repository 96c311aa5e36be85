"""Small loopback services for tests: an HTTP server on a free port, and waiting for a
condition with a deadline."""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

PATIENCE_S = 30.0


@contextlib.contextmanager
def http_server(handler: Callable[..., Any]) -> Iterator[str]:
    """`handler` (a BaseHTTPRequestHandler class, or a partial of one) serving on 127.0.0.1 in a
    thread; its base URL. Shut down on the way out."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def wait_for(condition: Callable[[], bool], what: str, patience_s: float = PATIENCE_S) -> None:
    """Poll `condition` every 0.1 s; fail naming `what` after `patience_s`."""
    deadline = time.monotonic() + patience_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {patience_s:g} s for {what}")
        time.sleep(0.1)
