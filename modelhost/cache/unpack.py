"""Safe unpacking of tar, zip and TorchServe .mar artifacts into the disk tier.

Nothing escapes the folder and no links are made. Tar's extended headers are size-checked before
`tarfile` reads them whole, so an archive cannot make the frontend allocate what they claim.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import re
import shutil
import stat
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import IO

from modelhost.errors import ModelLoadError, UnsafeArtifact
from modelhost.names import TAR_SUFFIXES, ZIP_SUFFIXES

# zips or gzips inside, but single files
_MODEL_FILE_SUFFIXES = (".pt", ".pt2", ".pth", ".npz", ".keras", ".joblib", ".pkl", ".pickle")
_CHUNK_BYTES = 1 << 20
_DRIVE = re.compile(r"^[A-Za-z]:")
MAX_NAME_PART_BYTES = 255  # what Linux file systems hold
MAX_EXTENDED_HEADER_BYTES = 64 * 1024
MAX_EXTENDED_HEADERS_BYTES = 1 << 20  # an archive's, together
MAX_EXTENDED_HEADERS_IN_A_ROW = 8  # tarfile reads a chain of them by recursion
_EXTENDED_TYPES = (
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
)


class _Unreadable(Exception):
    """A member the archive's damage makes unreadable (a bad offset, an unknown method)."""


# besides the archive modules' own errors; fuzzing found zipfile seeking to a negative offset
_READ_ERRORS = (OSError, ValueError, NotImplementedError, RuntimeError)

_MALFORMED = (
    _Unreadable,
    tarfile.TarError,
    zipfile.BadZipFile,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    gzip.BadGzipFile,
    FileExistsError,
    IsADirectoryError,
    NotADirectoryError,
    NotImplementedError,  # zipfile's "zip file version 8.4": a damaged version field
)


class _Budget:
    """Counts members and bytes written, refusing as soon as a limit is passed."""

    def __init__(
        self, archive: Path, max_bytes: int, max_files: int, on_bytes: Callable[[int], None]
    ) -> None:
        self.archive, self.max_bytes, self.max_files = archive, max_bytes, max_files
        self.on_bytes = on_bytes
        self.files = 0
        self.bytes = 0

    def add_member(self, name: str) -> None:
        self.files += 1
        if self.files > self.max_files:
            raise _refuse(self.archive, name, f"is past the limit of {self.max_files} members")

    def add_bytes(self, name: str, count: int) -> None:
        self.bytes += count
        if self.bytes > self.max_bytes:
            raise _refuse(
                self.archive,
                name,
                f"takes the unpacked size past the limit of {self.max_bytes} bytes",
            )
        self.on_bytes(self.bytes)

    def declare(self, total: int) -> None:
        """Members will take `total` bytes: room for them is asked before a byte is written."""
        if total > self.bytes:
            self.on_bytes(total)


def is_archive(path: Path) -> bool:
    """By its name, else by its first bytes."""
    return _kind(path) is not None


def unpack_archive(
    archive: Path,
    dest: Path,
    *,
    max_bytes: int,
    max_files: int,
    on_bytes: Callable[[int], None] = lambda total: None,
) -> Path:
    """Unpack `archive` into `dest` atomically, or raise `UnsafeArtifact`.

    `on_bytes` hears the bytes written so far, or about to be, and may raise to stop.
    """
    kind = _kind(archive)
    if kind is None:
        raise ModelLoadError(f"{archive.name} is not a tar, tar.gz or zip archive")
    dest.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}", dir=dest.parent))
    try:
        _EXTRACTORS[kind](archive, temp, _Budget(archive, max_bytes, max_files, on_bytes))
        temp.chmod(0o755)  # mkdtemp makes it private
        _publish(temp, dest)
    except _MALFORMED as exc:
        shutil.rmtree(temp, ignore_errors=True)
        raise ModelLoadError(
            f"could not unpack {archive.name}: {type(exc).__name__}: {exc}; the archive is "
            "corrupt, truncated or malformed: upload it again"
        ) from exc
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return dest


def _kind(path: Path) -> str | None:
    name = path.name.lower()
    if name.endswith(TAR_SUFFIXES):
        return "tar"
    if name.endswith(ZIP_SUFFIXES):
        return "zip"
    if name.endswith(_MODEL_FILE_SUFFIXES) or not path.is_file():
        return None
    if zipfile.is_zipfile(path):
        return "zip"
    return "tar" if _has_tar_header(path) else None


def _has_tar_header(path: Path) -> bool:
    """Whether a POSIX tar header starts the file, maybe compressed."""
    # not tarfile.is_tarfile: it says yes to any file that starts with 512 zero bytes
    try:
        return _first_block(path)[257:262] == b"ustar"
    except (OSError, EOFError, lzma.LZMAError):
        return False


def _first_block(path: Path) -> bytes:
    with open(path, "rb") as raw:
        magic = raw.read(6)
        raw.seek(0)
        stream: io.BufferedIOBase
        if magic.startswith(b"\x1f\x8b"):
            stream = gzip.GzipFile(fileobj=raw)
        elif magic.startswith(b"BZh"):
            stream = bz2.BZ2File(raw)
        elif magic.startswith(b"\xfd7zXZ\x00"):
            stream = lzma.LZMAFile(raw)  # noqa: SIM115 (closed by the with below)
        else:
            return raw.read(512)
        with stream:
            return stream.read(512)


def _publish(temp: Path, dest: Path) -> None:
    """Rename into place; if another unpack won the race, keep its folder and drop ours."""
    try:
        os.rename(temp, dest)
    except OSError:
        if not dest.is_dir():
            raise
        shutil.rmtree(temp, ignore_errors=True)


class _OversizedHeader(Exception):
    """An extended tar header past the limits."""


class _BoundedTarInfo(tarfile.TarInfo):
    """Checks an extended header's declared size before `tarfile` reads it."""

    def _proc_member(self, tar: tarfile.TarFile) -> tarfile.TarInfo:
        seen = tar.__dict__.setdefault("_modelhost_extended", [0, 0])  # [bytes, in a row]
        if self.type not in _EXTENDED_TYPES:
            seen[1] = 0
        else:
            seen[0] += self.size
            seen[1] += 1
            if self.size > MAX_EXTENDED_HEADER_BYTES:
                raise _OversizedHeader(f"declares a {self.size}-byte extended header")
            if seen[0] > MAX_EXTENDED_HEADERS_BYTES or seen[1] > MAX_EXTENDED_HEADERS_IN_A_ROW:
                raise _OversizedHeader("has too many extended headers")
        member: tarfile.TarInfo = super()._proc_member(tar)  # type: ignore[misc]
        return member


def _extract_tar(archive: Path, root: Path, budget: _Budget) -> None:
    try:
        _extract_tar_members(archive, root, budget)
    except _OversizedHeader as error:
        raise UnsafeArtifact(
            f"refused to unpack {archive.name}: a member {error} (the limits are "
            f"{MAX_EXTENDED_HEADER_BYTES} bytes each, {MAX_EXTENDED_HEADERS_BYTES} in all, "
            f"{MAX_EXTENDED_HEADERS_IN_A_ROW} in a row); repack it with shorter names"
        ) from None


def _extract_tar_members(archive: Path, root: Path, budget: _Budget) -> None:
    with tarfile.open(archive, mode="r:*", tarinfo=_BoundedTarInfo) as tar:
        for member in tar:  # headers are read one at a time, never the whole index up front
            budget.add_member(member.name)
            target = _target(archive, root, member.name)
            if member.isdir():
                _make_dir(target)
            elif member.isfile():
                _refuse_declared(budget, member.name, budget.bytes + member.size)
                budget.declare(budget.bytes + member.size)
                source = tar.extractfile(member)
                assert source is not None  # regular members always have data
                _write(source, target, member.name, budget)
            else:
                raise _refuse(archive, member.name, _tar_kind(member))


def _extract_zip(archive: Path, root: Path, budget: _Budget) -> None:
    declared = _zip_entries_declared(archive)
    if declared is not None and declared > budget.max_files:
        raise _refuse(
            archive,
            "(index)",
            f"declares {declared} members, past the limit of {budget.max_files} members",
        )
    with zipfile.ZipFile(archive) as zip_file:
        members = zip_file.infolist()  # the central directory lists every member up front
        budget.declare(_check_zip_index(members, budget))
        for member in members:
            _extract_zip_member(zip_file, member, _target(archive, root, member.filename), budget)


def _zip_entries_declared(archive: Path) -> int | None:
    """The declared member count, read before `ZipFile` parses the index into objects."""
    end_record = getattr(zipfile, "_EndRecData", None)  # zipfile's own reader, zip64 included
    if end_record is None:
        return None
    with open(archive, "rb") as file:
        record = end_record(file)
    return int(record[zipfile._ECD_ENTRIES_TOTAL]) if record else None  # type: ignore[attr-defined]


def _check_zip_index(members: list[zipfile.ZipInfo], budget: _Budget) -> int:
    """The bytes the members declare, each within the limits."""
    declared_bytes = 0
    for member in members:
        budget.add_member(member.filename)
        declared_bytes += member.file_size
        _refuse_declared(budget, member.filename, declared_bytes)
    return declared_bytes


def _extract_zip_member(
    zip_file: zipfile.ZipFile, member: zipfile.ZipInfo, target: Path | None, budget: _Budget
) -> None:
    mode = member.external_attr >> 16  # Unix mode bits, when a Unix tool made the archive
    if stat.S_ISLNK(mode):
        raise _refuse(budget.archive, member.filename, "is a symbolic link; links are not allowed")
    if member.is_dir():
        _make_dir(target)
        return
    try:
        source = zip_file.open(member)
    except _READ_ERRORS as error:
        raise _Unreadable(f"{member.filename}: {error}") from error
    with source:
        _write(source, target, member.filename, budget)


def _target(archive: Path, root: Path, name: str) -> Path | None:
    """Where a member goes under `root`; None for the root itself (``./``)."""
    if "\x00" in name:
        raise _refuse(archive, name, "has a NUL byte in its name")
    path = PurePosixPath(name.replace("\\", "/"))  # Windows zip tools may write backslashes
    if path.is_absolute() or _DRIVE.match(name):
        raise _refuse(archive, name, "has an absolute path")
    if ".." in path.parts:
        raise _refuse(archive, name, "climbs out of the folder with '..'")
    if any(len(os.fsencode(part)) > MAX_NAME_PART_BYTES for part in path.parts):
        raise _refuse(archive, name, f"has a name part over {MAX_NAME_PART_BYTES} bytes")
    return root.joinpath(*path.parts) if path.parts else None


def _make_dir(target: Path | None) -> None:
    if target is not None:
        target.mkdir(parents=True, exist_ok=True)


def _write(source: IO[bytes], target: Path | None, name: str, budget: _Budget) -> None:
    """Count bytes actually written: headers may lie, the data cannot."""
    if target is None:
        raise _refuse(budget.archive, name, "is a file with no name")
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target, "wb") as sink:
        while chunk := _read(source, name):
            budget.add_bytes(name, len(chunk))
            sink.write(chunk)


def _read(source: IO[bytes], name: str) -> bytes:
    """The next chunk; a failed read is a malformed archive, not this machine's I/O error."""
    try:
        return source.read(_CHUNK_BYTES)
    except _READ_ERRORS as error:
        raise _Unreadable(f"{name}: {error}") from error


def _refuse_declared(budget: _Budget, name: str, declared_bytes: int) -> None:
    if declared_bytes > budget.max_bytes:
        raise _refuse(
            budget.archive,
            name,
            f"takes the declared unpacked size to {declared_bytes} bytes, past the limit of "
            f"{budget.max_bytes} bytes",
        )


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.issym():
        return f"is a symbolic link to '{member.linkname}'; links are not allowed"
    if member.islnk():
        return f"is a hard link to '{member.linkname}'; links are not allowed"
    if member.ischr() or member.isblk() or member.isfifo():
        return "is a device or FIFO; only files and folders are allowed"
    return "is not a regular file or folder; only files and folders are allowed"


def _refuse(archive: Path, name: str, rule: str) -> UnsafeArtifact:
    shown = name if len(name) <= 200 else name[:200] + "…"
    return UnsafeArtifact(f"refused to unpack {archive.name}: member '{shown}' {rule}")


_EXTRACTORS: dict[str, Callable[[Path, Path, _Budget], None]] = {
    "tar": _extract_tar,
    "zip": _extract_zip,
}
