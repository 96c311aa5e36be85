"""Two tenants behind --refuse-pickle: evil's handler models beside good's ONNX iris."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import httpx

from modelhost import testing

ROWS = [[0.0, 0.0, 0.0, 0.0]]


def hostile_store(root: Path, handlers: Mapping[str, str]) -> Path:
    """evil/NAME/handler.py of each source, and good/iris.onnx."""
    for name, source in handlers.items():
        (root / "evil" / name).mkdir(parents=True)
        (root / "evil" / name / "handler.py").write_text(source)
    testing.onnx_iris(root / "good/iris.onnx")
    return root


@contextlib.contextmanager
def two_tenants(
    store: Path, scratch: Path, tenant_from: str = "name:1", **settings: object
) -> Iterator[testing.RunningServer]:
    """Tenants evil and good (or, by `tenant_from`, each model), each in sandboxed workers."""
    args = testing.serve_args(
        store, scratch / "cache", workers=2, tenant_from=tenant_from, **settings
    )
    with testing.RunningServer([*args, "--refuse-pickle"], scratch) as running:
        assert invoke(running, "good/iris.onnx").status_code == 200
        yield running


def invoke(server: testing.RunningServer, name: str, body: object = ROWS) -> httpx.Response:
    return httpx.post(f"{server.url}/models/{name}/invoke", json=body, timeout=120)
