"""A folder of artifacts on this machine: the embedded default store, read in place."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from urllib.parse import quote_from_bytes, unquote, urlparse

from modelhost.cache.stores.base import (
    LIST_PAGE_KEYS,
    ObjectInfo,
    Progress,
    validate_name,
)
from modelhost.cache.stores.walk import FolderWalk
from modelhost.errors import InvalidModelName, ModelNotFound


def resolved(url: str) -> str:
    """The resolved path of a file:// URL or a plain path.

    Text, not Path: pathlib interns every part it parses, so made-up names would grow the table.
    """
    parsed = urlparse(url)
    return os.path.realpath(unquote(parsed.path) if parsed.scheme == "file" else url)


def file_uri(path: str) -> str:
    """What Path(path).as_uri() gives, without parsing the path."""
    return "file://" + quote_from_bytes(os.fsencode(path))


class LocalStore:
    """A folder; a model's key is its path relative to the folder."""

    listable = True

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.uri = self.root.as_uri()
        self._prefix = os.path.join(self.root, "")

    def url_of(self, key: str) -> str:
        return file_uri(os.path.join(self.root, key))

    def key_of(self, url: str) -> str | None:
        path = resolved(url)
        return path.removeprefix(self._prefix) if path.startswith(self._prefix) else None

    def inside(self, path: str, key: str) -> str:
        """`path`, resolved, if it is inside the store (a folder link may lead anywhere)."""
        path = os.path.realpath(path)
        if not path.startswith(self._prefix):
            raise InvalidModelName(f"model {key!r} resolves outside the model store")
        return path

    def local_path(self, key: str) -> Path:
        path = self.inside(os.path.join(self.root, validate_name(key)), key)
        if not os.path.exists(path):
            raise ModelNotFound(
                f"model {key} is not in the model store; "
                "check the name (it is the artifact's path relative to the store)"
            )
        return Path(path)

    async def stat(self, key: str) -> ObjectInfo:
        path = self.local_path(key)
        return ObjectInfo(path.stat().st_size if path.is_file() else None)

    async def fetch(self, key: str, dest: Path, expected: ObjectInfo, progress: Progress) -> None:
        await asyncio.to_thread(shutil.copyfile, self.local_path(key), dest)
        progress(dest.stat().st_size)

    async def list_keys(self, after: str = "", limit: int = LIST_PAGE_KEYS) -> list[str]:
        """Files of known kinds and folders with their own handler; hidden ones are left out."""
        walk = FolderWalk(after, limit)
        await asyncio.to_thread(walk.folder, str(self.root), "")
        return walk.found
