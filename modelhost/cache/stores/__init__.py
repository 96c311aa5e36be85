"""Where artifacts live: the configured store, and any URL that `allowed_urls` lets in."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse, urlsplit

from modelhost.cache.stores.base import ObjectInfo, Progress, Store, validate_name
from modelhost.cache.stores.local import LocalStore, file_uri, resolved
from modelhost.errors import ConfigError, Forbidden, InvalidModelName
from modelhost.urls import redact_url

__all__ = ["ObjectInfo", "Progress", "Store", "StoreSettings", "Stores"]

REMOTE_SCHEMES = ("s3", "http", "https")


@dataclass(frozen=True)
class StoreSettings:
    """What every store of the server shares."""

    timeout_s: float = 30.0
    max_concurrent_downloads: int = 4


class Stores:
    """The configured store, stores for other allowed URLs, and their shared clients."""

    def __init__(
        self,
        store: str | Store,
        allowed_urls: tuple[str, ...] = (),
        settings: StoreSettings | None = None,
    ) -> None:
        self.settings = settings or StoreSettings()
        self._clients: dict[str, Any] = {}
        self.default = self.open(store) if isinstance(store, str) else store
        self.allowed_urls = allowed_urls or (self.default.uri + "/*",)

    def open(self, uri: str) -> Store:
        scheme = urlparse(uri).scheme
        if scheme == "s3":
            from modelhost.cache.stores.s3 import S3Store

            parts = urlparse(uri)
            return S3Store(parts.netloc, parts.path, self._client("s3"))
        if scheme in ("http", "https"):
            from modelhost.cache.stores.http import HttpStore

            return HttpStore(uri, self._client("http"))
        if scheme in ("", "file"):
            return LocalStore(Path(resolved(uri)))
        raise ConfigError(
            f"unsupported model store {uri!r}: use s3://, http(s)://, file:// or a path"
        )

    def refuse_missing_folder(self) -> None:
        """A local store must be a folder at start: a mistyped path would answer 404 to all."""
        store = self.default
        if isinstance(store, LocalStore) and not store.root.is_dir():
            root = store.root
            raise ConfigError(
                f"the model store {root} is not a folder: set --model-store to the folder "
                f"holding your models, or create it (`modelhost examples {root}` builds an "
                "example store)"
            )

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            s = self.settings
            if kind == "s3":
                from modelhost.cache.stores.s3 import S3Client

                self._clients[kind] = S3Client(s.timeout_s, s.max_concurrent_downloads)
            else:
                from modelhost.cache.stores.http import http_client

                self._clients[kind] = http_client(s.timeout_s)
        return self._clients[kind]

    def url_of(self, name: str) -> str:
        """A model's URL in the configured store."""
        url = self.default.url_of(validate_name(name))
        if isinstance(self.default, LocalStore):
            self.default.inside(resolved(url), name)  # a folder link must not lead out
        return url

    def normalize(self, url: str) -> str:
        """The one form `allowed_urls` decides on: '%2e%2e' refused, local links resolved."""
        scheme = urlparse(url).scheme
        if scheme in REMOTE_SCHEMES:
            path = urlsplit(url).path.removeprefix("/")
            validate_name(unquote(path))
            return url
        if scheme not in ("", "file"):
            raise InvalidModelName(
                f"unsupported URL {redact_url(url)!r}: use s3://, http(s)://, file:// or a path"
            )
        if scheme == "" and not os.path.isabs(url):
            return self.normalize(self.default.url_of(validate_name(url)))
        return file_uri(resolved(url))

    def admit(self, url: str) -> str:
        """The normalized URL, if `allowed_urls` admits it."""
        normalized = self.normalize(url)
        if not any(fnmatch.fnmatchcase(normalized, p) for p in self.allowed_urls):
            raise Forbidden(
                f"url {redact_url(url)!r} is outside the URLs models may be loaded from "
                f"({', '.join(self.allowed_urls)}); an operator can add a pattern to "
                "--allowed-urls"
            )
        return normalized

    def locate(self, url: str) -> tuple[Store, str]:
        key = self.default.key_of(url)
        if key is not None:
            return self.default, key
        path, mark, query = url.partition("?")  # a presigned URL's query may hold a '/'
        parent = path.rstrip("/").rpartition("/")[0]
        store = self.open(parent)
        key = store.key_of(path.rstrip("/") + mark + query)
        if key is None:
            raise InvalidModelName(f"{redact_url(url)!r} names no object below {parent}")
        return store, key

    async def close(self) -> None:
        for client in self._clients.values():
            await client.aclose()
