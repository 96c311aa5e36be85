"""Hostile archives, for tests of unpacking: path traversal, a link out, a tar bomb."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path
from typing import Any

from modelhost.testing import parent_made


def traversal_tar(path: Path) -> Path:
    """A .tar.gz whose one member is `../escape.txt`."""
    data = b"this file escaped the model folder\n"
    return _tar_of_one(path, _member("../escape.txt", len(data)), io.BytesIO(data))


def symlink_tar(path: Path) -> Path:
    """A .tar.gz whose one member, `model.joblib`, is a symlink to /etc/passwd."""
    member = tarfile.TarInfo("model.joblib")
    member.type, member.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return _tar_of_one(path, member, None)


def tar_bomb(path: Path, unpacked_bytes: int) -> Path:
    """A .tar.gz of one member, `model.joblib`, of `unpacked_bytes` zeros (streamed, not held)."""
    return _tar_of_one(path, _member("model.joblib", unpacked_bytes), _Zeros())


def _member(name: str, size: int) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.size, member.mode, member.mtime = size, 0o644, int(time.time())
    return member


def _tar_of_one(path: Path, member: tarfile.TarInfo, data: Any) -> Path:
    path = parent_made(path)
    with tarfile.open(path, "w:gz", compresslevel=1) as tar:
        tar.addfile(member, data)
    return path


class _Zeros(io.RawIOBase):
    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer)
        view[:] = bytes(len(view))
        return len(view)
