"""Artifacts behind plain HTTP(S), through httpx.

Redirects are not followed: `allowed_urls` judged the URL asked for, and a redirect could lead to
a metadata service or another tenant's files.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, unquote

import httpx

from modelhost.cache.stores.base import (
    LIST_PAGE_KEYS,
    SILENT,
    ObjectInfo,
    Progress,
    key_below,
    validate_name,
)
from modelhost.errors import (
    ModelhostError,
    ModelNotFound,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
)
from modelhost.urls import redact_url

# the bytes as stored: a gzip transfer encoding is never inflated into the cache
IDENTITY = {"Accept-Encoding": "identity"}
TRANSIENT_STATUSES = {408, 412, 425, 429, 500, 502, 503, 504}
HEAD_REFUSED = {403, 405, 501}


def http_client(timeout_s: float) -> httpx.AsyncClient:
    """One client (one connection pool) shared by every HTTP store of the server."""
    return httpx.AsyncClient(timeout=httpx.Timeout(timeout_s), follow_redirects=False)


class HttpStore:
    """Artifacts under an HTTP(S) root, fetched by GET through the server's shared client."""

    listable = False

    def __init__(self, root: str, client: httpx.AsyncClient) -> None:
        self.uri = root.rstrip("/")
        self.client = client

    def url_of(self, key: str) -> str:
        path, mark, query = key.partition("?")
        return f"{self.uri}/{quote(validate_name(path))}{mark}{query}"

    def key_of(self, url: str) -> str | None:
        key = key_below(self.uri, url)
        if not key:
            return None
        path, mark, query = key.partition("?")
        return unquote(path) + mark + query

    def local_path(self, key: str) -> Path | None:
        return None

    async def stat(self, key: str) -> ObjectInfo:
        url = self.url_of(key)
        response = await self._send(self.client.build_request("HEAD", url, headers=IDENTITY))
        await response.aclose()
        if response.status_code in HEAD_REFUSED:
            return ObjectInfo(None)  # e.g. a presigned GET URL: the GET will tell
        check(response, url)
        length = response.headers.get("content-length")
        return ObjectInfo(int(length) if length else None, response.headers.get("etag"))

    async def fetch(self, key: str, dest: Path, expected: ObjectInfo, progress: Progress) -> None:
        url = self.url_of(key)
        headers = {**IDENTITY, "If-Match": expected.etag} if expected.etag else IDENTITY
        response = await self._send(self.client.build_request("GET", url, headers=headers))
        try:
            check(response, url)
            with dest.open("wb") as file:
                async for chunk in response.aiter_raw():  # as it arrives: progress is seen
                    file.write(chunk)
                    progress(len(chunk))
        except httpx.HTTPError as error:
            raise translate(error, url) from error
        finally:
            await response.aclose()

    async def list_keys(self, after: str = "", limit: int = LIST_PAGE_KEYS) -> list[str]:
        raise StoreError(
            f"an HTTP store ({self.uri}) cannot be listed; name the models to preload in "
            "load_models, or keep them in S3 or a folder"
        )

    async def _send(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self.client.send(request, stream=True)
        except httpx.HTTPError as error:
            raise translate(error, str(request.url)) from error


def check(response: httpx.Response, url: str) -> None:
    if response.is_redirect:
        raise StoreError(
            f"the store answered HTTP {response.status_code} for {redact_url(url)}, a redirect "
            f"to {redact_url(response.headers.get('location', '?'))}; redirects are not followed "
            "for model URLs: give the final URL (allowed_urls must admit it)"
        )
    if response.status_code >= 400:
        raise status_error(response.status_code, url)


def status_error(status: int, url: str) -> ModelhostError:
    url = redact_url(url)
    if status in (404, 410):
        return ModelNotFound(f"{url} does not exist in the store (HTTP {status})")
    kind = StoreUnavailable if status in TRANSIENT_STATUSES else StoreError
    return kind(f"the store answered HTTP {status} for {url}")


def translate(error: httpx.HTTPError, url: str) -> ModelhostError:
    url = redact_url(url)
    if isinstance(error, httpx.ReadTimeout | httpx.PoolTimeout):
        return StoreTimeout(f"the store sent nothing for {url} within --store-timeout-s{SILENT}")
    if isinstance(error, httpx.TransportError):
        return StoreUnavailable(
            f"cannot reach the store for {url}: {type(error).__name__}: {error}"
        )
    return StoreError(f"the store failed on {url}: {error}")
