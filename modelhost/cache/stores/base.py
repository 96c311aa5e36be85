"""The store seam: what the disk tier needs from any place artifacts live.

A store answers two questions about a key (a model's path below the store's root): how big is it
and which version (`stat`), and give me its bytes (`fetch`, into a file the caller names). Errors
are the tree's: `ModelNotFound` for a missing object, `StoreError` for a store that failed
(`TransientStoreError` when a retry may help), `StoreTimeout` for one that stopped answering.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from modelhost.errors import InvalidModelName

MAX_NAME_LENGTH = 1024
ARTIFACT_SUFFIXES = (".joblib", ".pkl", ".pickle", ".tar.gz", ".tgz", ".tar", ".zip", ".mar")
HANDLER_FILES = ("handler.py", "code/inference.py")

Progress = Callable[[int], None]  # called with the bytes received since the last call


@dataclass(frozen=True)
class ObjectInfo:
    """What a store says of one object: its size and, where it has one, its version tag."""

    size: int | None  # None when the store does not say (an HTTP server without Content-Length)
    etag: str | None = None
    md5: str | None = None  # hex digest of the whole object, where the store vouches for one


class Store(Protocol):
    """Where artifacts come from: a root URL under which it states, fetches and lists keys."""

    uri: str  # the root, as the user wrote it, without a trailing slash

    def url_of(self, key: str) -> str:
        """The full URL of a key."""
        ...

    def key_of(self, url: str) -> str | None:
        """The key of a URL inside this store, or None if it is outside."""
        ...

    def local_path(self, key: str) -> Path | None:
        """The path to read the object in place, for stores on this machine's disk."""
        ...

    async def stat(self, key: str) -> ObjectInfo: ...

    async def fetch(self, key: str, dest: Path, expected: ObjectInfo, progress: Progress) -> None:
        """Write the object's bytes to `dest`; refuse a version other than `expected.etag`."""
        ...

    async def list_keys(self) -> list[str]:
        """The keys of every artifact in the store (for load_models=ALL)."""
        ...


class KeyedByPath:
    """URLs of a remote store: its root, a slash, the key. Nothing is on this machine's disk."""

    uri: str

    def url_of(self, key: str) -> str:
        return f"{self.uri}/{key}"

    def key_of(self, url: str) -> str | None:
        return key_below(self.uri, url)

    def local_path(self, key: str) -> Path | None:
        return None


def validate_name(name: str) -> str:
    """A model name is a relative POSIX path with no way out of the store."""
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


def is_artifact_key(key: str) -> bool:
    """A file of a kind modelhost loads, judged by its name alone (for listings of objects)."""
    return key.lower().endswith(ARTIFACT_SUFFIXES)


def key_below(root: str, url: str) -> str | None:
    """The part of `url` below `root` (both without trailing slash), or None if outside."""
    prefix = root + "/"
    if not url.startswith(prefix) or len(url) == len(prefix):
        return None
    return url[len(prefix) :]


def is_disk_full(error: BaseException) -> bool:
    """Whether writing failed for want of space (or quota): the disk tier's 507, not the store's."""
    return isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
