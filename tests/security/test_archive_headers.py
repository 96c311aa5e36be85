"""Tar's extended headers (GNU long names, pax records) are read whole by `tarfile` before any
member is written: their declared sizes are checked first, so a small archive cannot make the
frontend allocate what its headers claim."""

from __future__ import annotations

import io
import tarfile
import tracemalloc
from pathlib import Path

import pytest

from modelhost.cache.unpack import unpack_archive
from modelhost.errors import UnsafeArtifact

CLAIMED = 40 * 2**20  # what the header makes tarfile read in one piece


def archive_with(path: Path, member: tarfile.TarInfo, format: int) -> Path:
    with tarfile.open(path, "w:gz", format=format) as tar:
        tar.addfile(member, io.BytesIO(b"x"))
    return path


def peak_bytes_of_refusal(archive: Path, out: Path, match: str) -> int:
    """The most Python allocated while unpacking refused `archive` (UnsafeArtifact: `match`)."""
    tracemalloc.start()
    try:
        with pytest.raises(UnsafeArtifact, match=match):
            unpack_archive(archive, out, max_bytes=2**30, max_files=1000)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def long_name(tmp_path: Path) -> Path:
    member = tarfile.TarInfo("a" * CLAIMED)
    member.size = 1
    return archive_with(tmp_path / "long.tar.gz", member, tarfile.GNU_FORMAT)


def huge_pax(tmp_path: Path) -> Path:
    member = tarfile.TarInfo("m.txt")
    member.size = 1
    member.pax_headers = {"comment": "c" * CLAIMED}
    return archive_with(tmp_path / "pax.tar.gz", member, tarfile.PAX_FORMAT)


def many_globals(tmp_path: Path) -> Path:
    """A chain of global pax headers, each small, that together pile up in the reader."""
    path = tmp_path / "globals.tar.gz"
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for i in range(400):
            tar.fileobj.write(  # type: ignore[union-attr]
                tarfile.TarInfo(f"g{i}").create_pax_global_header({f"k{i}": "v" * 60_000})
            )
        member = tarfile.TarInfo("m.txt")
        member.size = 1
        tar.addfile(member, io.BytesIO(b"x"))
    return path


@pytest.mark.parametrize("make", [long_name, huge_pax, many_globals])
def test_extended_headers_are_refused_before_tarfile_reads_them_whole(
    make: object, tmp_path: Path
) -> None:
    archive = make(tmp_path)  # type: ignore[operator]
    assert archive.stat().st_size < 2 * 2**20  # small on the wire
    peak = peak_bytes_of_refusal(archive, tmp_path / "out", match="header")
    assert peak < 8 * 2**20, f"unpacking allocated {peak / 2**20:.1f} MiB at its peak"
    assert not (tmp_path / "out").exists()


def test_an_ordinary_long_name_still_unpacks(tmp_path: Path) -> None:
    member = tarfile.TarInfo("d/" + "n" * 200 + "/" + "m" * 200 + ".txt")
    member.size = 1
    for format in (tarfile.GNU_FORMAT, tarfile.PAX_FORMAT):
        archive = archive_with(tmp_path / f"ok{format}.tar.gz", member, format)
        out = unpack_archive(archive, tmp_path / f"out{format}", max_bytes=2**20, max_files=10)
        assert (out / member.name).read_bytes() == b"x"


def test_unholdable_name_is_refused(tmp_path: Path) -> None:
    """A name the file system cannot hold is refused, not an OS error."""
    member = tarfile.TarInfo("d/" + "n" * 300 + ".txt")  # one part past 255 bytes
    member.size = 1
    archive = archive_with(tmp_path / "n.tar.gz", member, tarfile.GNU_FORMAT)
    with pytest.raises(UnsafeArtifact, match="255"):
        unpack_archive(archive, tmp_path / "out", max_bytes=2**20, max_files=10)


def test_zip_index_past_member_limit_is_refused(
    tmp_path: Path,
) -> None:
    """A zip index past the member limit is refused before it is parsed."""
    import zipfile

    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as zip_file:
        for i in range(60_000):
            zip_file.writestr(f"{i}", b"")
    peak = peak_bytes_of_refusal(archive, tmp_path / "out", match="members")
    assert peak < 4 * 2**20, f"unpacking allocated {peak / 2**20:.1f} MiB at its peak"
