"""Entry folders of the disk tier: what an artifact is, an entry's record file, its size."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from modelhost.cache.disk_index import Row

ENTRY_FILE = "modelhost-entry.json"
MAX_ENTRY_NAME = 200
TEMP_PREFIX = ".tmp-"  # a folder being built or deleted; never an entry


@dataclass(eq=False)
class Artifact:
    """A model's files on this machine: where the worker loads them, their size and origin."""

    name: str
    path: Path  # what the worker loads: a file or a folder
    bytes: int
    entry: Path | None = None  # its folder in the cache, counted against the budget; None: in place
    source: str = ""  # the normalized URL it came from
    etag: str | None = None
    checked_at: float = 0.0  # when the store last vouched for `etag`
    last_used: float = 0.0


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def entry_folder_name(name: str) -> str:
    """A file name for a model's entry: the quoted name, or its digest when that is too long."""
    quoted = quote(name, safe="")
    return quoted if len(quoted) <= MAX_ENTRY_NAME else hashlib.sha256(name.encode()).hexdigest()


def write_record(folder: Path, artifact: Artifact) -> None:
    """Say in the folder what it holds, so that a folder the index lost can be taken back."""
    record = {"name": artifact.name, "source": artifact.source, "etag": artifact.etag}
    payload = artifact.path.relative_to(folder).as_posix()
    (folder / ENTRY_FILE).write_text(
        json.dumps(record | {"checked_at": artifact.checked_at, "payload": payload})
    )


def read_entry(folder: Path) -> Artifact | None:
    """The artifact an entry folder holds, or None if its record is missing or broken."""
    try:
        record: dict[str, Any] = json.loads((folder / ENTRY_FILE).read_text())
        payload = folder / record["payload"]
        if not payload.exists():
            return None
        return Artifact(
            record["name"],
            payload,
            tree_bytes(folder),
            folder,
            record["source"],
            record.get("etag"),
            record.get("checked_at", 0.0),
            folder.stat().st_mtime,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_entries(folders: list[Path]) -> list[tuple[Path, Artifact | None]]:
    """Each folder's artifact, or None for a folder to delete (run in a thread)."""
    return [(folder, read_entry(folder)) for folder in folders]


def has_any(folder: Path) -> bool:
    with os.scandir(folder) as listing:
        return next(listing, None) is not None


def remove_tree(path: Path) -> None:
    """Delete a folder or file, whichever it is (run in a thread)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def row_of(artifact: Artifact) -> Row:
    """The index's row for `artifact`: its payload relative to its entry folder, if it has one."""
    a, entry = artifact, artifact.entry
    path = a.path.relative_to(entry).as_posix() if entry else str(a.path)
    folder = entry.name if entry else None
    return Row(a.name, folder, path, a.bytes, a.source, a.etag, a.checked_at, a.last_used)


def artifact_of(row: Row, entries_dir: Path) -> Artifact:
    """The artifact a row of the index describes, its entry under `entries_dir`."""
    entry = entries_dir / row.entry if row.entry else None
    path = entry / row.path if entry else Path(row.path)
    return Artifact(
        row.name, path, row.bytes, entry, row.source, row.etag, row.checked_at, row.last_used
    )
