"""Entry folders of the disk tier."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
from dataclasses import KW_ONLY, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from modelhost.cache.disk_index import Row

ENTRY_FILE = "modelhost-entry.json"
MAX_ENTRY_NAME = 200
TEMP_PREFIX = ".tmp-"  # being built or deleted


@dataclass(eq=False)
class Artifact:
    """A model's files on this machine."""

    name: str
    path: Path  # a file or a folder
    bytes: int
    _: KW_ONLY
    entry: Path | None = None  # None: read in place, outside the budget
    source: str = ""  # normalized URL
    etag: str | None = None
    checked_at: float = 0.0  # when the store last vouched for `etag`
    last_used: float = 0.0


def tree_bytes(path: str | Path) -> int:
    """Bytes of a file or of the regular files under a folder, links not followed.

    Paths stay text: pathlib interns every name it parses, for good.
    """
    if os.path.isfile(path):
        return os.path.getsize(path)
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            status = os.lstat(os.path.join(folder, name))
            total += status.st_size if stat.S_ISREG(status.st_mode) else 0
    return total


def entry_folder_name(name: str) -> str:
    """The quoted name, or its digest when that is too long."""
    quoted = quote(name, safe="")
    return quoted if len(quoted) <= MAX_ENTRY_NAME else hashlib.sha256(name.encode()).hexdigest()


def write_record(folder: Path, artifact: Artifact) -> None:
    """So a folder the index lost can be taken back."""
    record = {"name": artifact.name, "source": artifact.source, "etag": artifact.etag}
    payload = artifact.path.relative_to(folder).as_posix()
    (folder / ENTRY_FILE).write_text(
        json.dumps(record | {"checked_at": artifact.checked_at, "payload": payload})
    )


def read_entry(folder: str) -> Row | None:
    """None if the record is missing or broken."""
    try:
        with open(os.path.join(folder, ENTRY_FILE)) as file:
            record: dict[str, Any] = json.load(file)
        name, source, payload = record["name"], record["source"], record["payload"]
        if not all(isinstance(text, str) for text in (name, source, payload)):
            return None
        if not os.path.exists(os.path.join(folder, payload)):
            return None
        etag, checked_at = record.get("etag"), float(record.get("checked_at", 0.0))
        size, used = tree_bytes(folder), os.stat(folder).st_mtime
        return Row(
            name=name,
            entry=os.path.basename(folder),
            path=payload,
            bytes=size,
            source=source,
            etag=etag,
            checked_at=checked_at,
            last_used=used,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_entries(folders: list[str]) -> list[tuple[str, Row | None]]:
    """Each folder's row, or None for a folder to delete."""
    return [(folder, read_entry(folder)) for folder in folders]


def has_any(folder: Path) -> bool:
    with os.scandir(folder) as listing:
        return next(listing, None) is not None


def remove_tree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def row_of(artifact: Artifact) -> Row:
    a, entry = artifact, artifact.entry
    path = a.path.relative_to(entry).as_posix() if entry else str(a.path)
    folder = entry.name if entry else None
    return Row(
        name=a.name,
        entry=folder,
        path=path,
        bytes=a.bytes,
        source=a.source,
        etag=a.etag,
        checked_at=a.checked_at,
        last_used=a.last_used,
    )


def artifact_of(row: Row, entries_dir: Path) -> Artifact:
    entry = entries_dir / row.entry if row.entry else None
    path = entry / row.path if entry else Path(row.path)
    return Artifact(
        row.name,
        path,
        row.bytes,
        entry=entry,
        source=row.source,
        etag=row.etag,
        checked_at=row.checked_at,
        last_used=row.last_used,
    )
