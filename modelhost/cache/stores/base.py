"""The store seam: what the disk tier needs from any place artifacts live."""

from __future__ import annotations

import errno
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from modelhost.errors import InvalidModelName
from modelhost.names import is_model_file

MAX_NAME_LENGTH = 1024
LIST_PAGE_KEYS = 1000  # keys a listing page holds unless asked for fewer

Progress = Callable[[int], None]  # bytes received since the last call

SILENT = "; check that the store answers, or raise --store-timeout-s"  # a StoreTimeout's way out


@dataclass(frozen=True)
class ObjectInfo:
    """What a store says of one object."""

    size: int | None  # None: not announced
    etag: str | None = None
    md5: str | None = None  # where the store vouches for one


class Store(Protocol):
    """Where artifacts come from: keys below a root URL."""

    uri: str  # as the user wrote it, without a trailing slash
    listable: bool  # whether list_keys answers (an HTTP store cannot)

    def url_of(self, key: str) -> str: ...

    def key_of(self, url: str) -> str | None:
        """None for a URL outside this store."""
        ...

    def local_path(self, key: str) -> Path | None:
        """Where to read the object in place, for stores on this machine."""
        ...

    async def stat(self, key: str) -> ObjectInfo: ...

    async def fetch(self, key: str, dest: Path, expected: ObjectInfo, progress: Progress) -> None:
        """Write the object's bytes to `dest`; refuse a version other than `expected.etag`."""
        ...

    async def list_keys(self, after: str = "", limit: int = LIST_PAGE_KEYS) -> list[str]:
        """Up to `limit` models' keys after `after`, in name order: a page of the store."""
        ...


class KeyedByPath:
    """URLs of a remote store: its root, a slash, the key."""

    uri: str

    def url_of(self, key: str) -> str:
        return f"{self.uri}/{key}"

    def key_of(self, url: str) -> str | None:
        return key_below(self.uri, url)

    def local_path(self, key: str) -> Path | None:
        return None


def validate_name(name: str) -> str:
    """A relative POSIX path with no way out of the store."""
    if not name or len(name) > MAX_NAME_LENGTH or "\x00" in name or "\\" in name:
        raise InvalidModelName(
            f"invalid model name {name!r}: use a relative path such as "
            "tenants/t007.joblib (at most 1024 characters)"
        )
    if any(part in ("", ".", "..") for part in name.split("/")):
        raise InvalidModelName(
            f"invalid model name {name!r}: names are paths relative to the "
            "model store, with no '.', '..' or empty parts and no leading '/'"
        )
    return name


def page_of(keys: Iterable[str], after: str, limit: int) -> list[str]:
    """The first `limit` model keys after `after` of keys in name order.

    A remote store's model is one object, so a key prefix is never a model of its own.
    """
    later = (key for key in keys if key > after and is_model_file(key.rsplit("/", 1)[-1]))
    return list(itertools.islice(later, limit))


def key_below(root: str, url: str) -> str | None:
    prefix = root + "/"
    if not url.startswith(prefix) or len(url) == len(prefix):
        return None
    return url[len(prefix) :]


def is_disk_full(error: BaseException) -> bool:
    """Out of space or quota: the disk tier's 507, not the store's fault."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
