"""The one-method seam the load generator sends through, and an in-memory fake.

aiohttp is the default: see decisions.md, "The load generator sends with aiohttp".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from modelhost.protocols.answer_headers import CACHE, INSTANCE, TIMING

MESSAGE_CHARS = 300  # of an error's reason kept a request


@dataclass(frozen=True)
class Reply:
    status: int
    cache: str | None = None  # X-Modelhost-Cache
    server_timing: str = ""
    bytes_out: int = 0
    instance: str = ""  # X-Modelhost-Instance
    message: str = ""  # an error's reason, from its body


class Transport(Protocol):
    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Reply: ...

    async def close(self) -> None: ...


class AiohttpTransport:
    def __init__(self, timeout_s: float) -> None:
        import aiohttp

        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=None)
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        async with self._session.post(url, data=body, headers=dict(headers)) as response:
            content = await response.read()
            return _reply(response.status, response.headers, content)

    async def close(self) -> None:
        await self._session.close()


class HttpxTransport:
    def __init__(self, timeout_s: float) -> None:
        import httpx

        limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
        self._client = httpx.AsyncClient(timeout=timeout_s, limits=limits)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        response = await self._client.post(url, content=body, headers=dict(headers))
        return _reply(response.status_code, response.headers, response.content)

    async def close(self) -> None:
        await self._client.aclose()


Handler = Callable[[str, bytes, Mapping[str, str]], Awaitable[Reply]]


class FakeTransport:
    """Answers with `handler(url, body, headers)`, else 200 after `delay_s`."""

    def __init__(self, handler: Handler | None = None, delay_s: float = 0.0) -> None:
        self.handler, self.delay_s, self.sent = handler, delay_s, 0

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        self.sent += 1
        if self.handler is not None:
            return await self.handler(url, body, headers)
        await asyncio.sleep(self.delay_s)
        return Reply(200, "hit", "infer;dur=0.5", 2)

    async def close(self) -> None:
        return None


def _reply(status: int, headers: Mapping[str, str], content: bytes) -> Reply:
    return Reply(
        status,
        cache=headers.get(CACHE),
        server_timing=headers.get(TIMING, ""),
        bytes_out=len(content),
        instance=headers.get(INSTANCE, ""),
        message=message_of(content) if status >= 400 else "",
    )


def message_of(body: bytes) -> str:
    """An error body's `message` (SageMaker's `Message`), else its start."""
    try:
        document = json.loads(body)
    except ValueError:
        document = None
    if isinstance(document, dict):
        found = document.get("message") or document.get("Message") or document.get("error")
        if isinstance(found, str):
            return found[:MESSAGE_CHARS]
    return body[:MESSAGE_CHARS].decode(errors="replace").strip()


CLIENTS: dict[str, Callable[[float], Transport]] = {
    "aiohttp": AiohttpTransport,
    "httpx": HttpxTransport,
}


class SigV4Transport:
    """Signs each request for SageMaker's InvokeEndpoint with botocore and sends it via `inner`."""

    SERVICE = "sagemaker"

    def __init__(self, inner: Transport, region: str) -> None:
        import botocore.session

        credentials = botocore.session.get_session().get_credentials()
        if credentials is None:
            raise ValueError(
                "no AWS credentials in the standard chain (environment, ~/.aws, SSO, instance "
                "role): set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY"
            )
        self.inner, self.region, self._credentials = inner, region, credentials

    def sign(self, url: str, body: bytes, headers: Mapping[str, str]) -> dict[str, str]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        request = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
        frozen = self._credentials.get_frozen_credentials()  # refreshed on expiry
        SigV4Auth(frozen, self.SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Reply:
        return await self.inner.post(url, body, self.sign(url, body, headers))

    async def close(self) -> None:
        await self.inner.close()


def open_transport(client: str, timeout_s: float, sign_region: str = "") -> Transport:
    """The client by name, SigV4-signed with `sign_region`."""
    if client not in CLIENTS:
        raise ValueError(f"unknown client {client!r}: choose one of {sorted(CLIENTS)}")
    transport = CLIENTS[client](timeout_s)
    return SigV4Transport(transport, sign_region) if sign_region else transport
