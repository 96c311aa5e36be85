"""Who the caller is comes from the TCP peer unless proxies are trusted by --forwarded-allow-ips
(uvicorn's FORWARDED_ALLOW_IPS variable alone does not turn that trust on), and the server can
speak TLS itself with --ssl-certfile/--ssl-keyfile."""

from __future__ import annotations

import os
import ssl
from pathlib import Path

import httpx
import pytest
from helpers.tls import self_signed

from modelhost import testing

pytestmark = pytest.mark.e2e

FORGED = {"X-Forwarded-For": "203.0.113.7"}  # a caller outside this machine, if believed


def management_call(url: str) -> httpx.Response:
    """A management call from loopback: authorized, then refused (400) for its empty body;
    403 if the server takes the caller for another machine."""
    return httpx.post(f"{url}/models", json={}, headers=FORGED, timeout=30)


def test_forwarded_for_is_ignored_even_with_uvicorns_variable_set(
    store: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "FORWARDED_ALLOW_IPS": "*"}
    args = testing.serve_args(store, tmp_path / "cache", workers=1)
    with testing.RunningServer(args, tmp_path, env=env) as server:
        response = management_call(server.url)
    assert response.status_code == 400 and response.json()["type"] == "BadRequestBody"


def test_forwarded_for_is_believed_from_configured_proxies_only(
    store: Path, tmp_path: Path
) -> None:
    args = testing.serve_args(store, tmp_path / "cache", workers=1, forwarded_allow_ips="127.0.0.1")
    with testing.RunningServer(args, tmp_path) as server:
        response = management_call(server.url)
    assert response.status_code == 403 and response.json()["type"] == "Forbidden"


def test_the_server_speaks_tls_with_the_given_certificate(store: Path, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    trusted = ssl.create_default_context(cafile=str(cert))
    args = testing.serve_args(
        store, tmp_path / "cache", workers=1, ssl_certfile=cert, ssl_keyfile=key
    )
    with testing.RunningServer(args, tmp_path, tls=trusted) as server:
        row = testing.iris_rows(1)[0]
        response = httpx.post(
            f"{server.url}/models/iris.pkl/invoke", json=row, verify=trusted, timeout=30
        )
        assert response.status_code == 200
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{server.port}/ping", timeout=5)  # no plain HTTP
