"""A connection's transport for driving uvicorn's protocol in-process: what it is written,
and whether it is closed."""

from __future__ import annotations

from typing import Any


class Transport:
    """What a connection is written; closed when told."""

    def __init__(self) -> None:
        self.written = b""
        self.closed = False
        self.closed_while_open = False  # by the server, before the client went

    def write(self, data: bytes) -> None:
        self.written += data

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_extra_info(self, name: str) -> Any:
        return ("127.0.0.1", 8000) if name in ("sockname", "peername") else None

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...

    def set_protocol(self, protocol: Any) -> None: ...
