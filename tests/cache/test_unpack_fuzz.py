"""Fuzz the unpacker: valid tar, tar.gz and zip archives with bytes flipped, cut or spliced.
Whatever the damage, unpacking either succeeds within its limits, leaving files only inside its
folder, or refuses with `ModelLoadError` (its `UnsafeArtifact` included): never another
exception, never a file outside, never a half-unpacked folder left behind."""

from __future__ import annotations

import io
import tarfile
import tempfile
import zipfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from modelhost.cache.unpack import unpack_archive
from modelhost.errors import ModelLoadError

FILES = {"model/model.joblib": b"weights" * 50, "model/code/inference.py": b"def f(): ..."}
MAX_BYTES, MAX_FILES = 64 * 1024, 16


def tar_bytes(mode: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in FILES.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in FILES.items():
            archive.writestr(name, data)
    return buffer.getvalue()


SEEDS = {"m.tar": tar_bytes("w"), "m.tar.gz": tar_bytes("w:gz"), "m.zip": zip_bytes()}


def tar_with_member(name: str) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.addfile(tarfile.TarInfo(name))
    return buffer.getvalue()


def zip_needing_version(version: int) -> bytes:
    """The seed zip with its first member needing a zip version `version / 10` to extract."""
    data = bytearray(SEEDS["m.zip"])
    data[data.index(b"PK\x01\x02") + 6] = version  # the central directory's version needed
    return bytes(data)


@st.composite
def damaged(draw: st.DrawFn) -> tuple[str, bytes]:
    name = draw(st.sampled_from(sorted(SEEDS)))
    data = bytearray(SEEDS[name])
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "cut", "splice"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at : at + draw(st.integers(1, 512))]
        else:
            data[at:at] = draw(st.binary(min_size=1, max_size=64))
    return name, bytes(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=damaged())
@example(case=("m.zip", zip_needing_version(84)))  # zipfile raised NotImplementedError
@example(case=("m.tar", tar_with_member("\udccc.bin")))  # not UTF-8: raised UnicodeEncodeError
def test_damaged_archive_stays_in_its_folder(
    case: tuple[str, bytes],
) -> None:
    """A damaged archive unpacks within its folder or is refused."""
    name, data = case
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / name).write_bytes(data)
        dest = root / "out" / "model"
        try:
            unpack_archive(root / name, dest, max_bytes=MAX_BYTES, max_files=MAX_FILES)
        except ModelLoadError:
            assert not dest.exists()
        else:
            files = [p for p in dest.rglob("*") if p.is_file()]
            assert len(files) <= MAX_FILES
            assert sum(p.stat().st_size for p in files) <= MAX_BYTES
        outside = {p.name for p in root.iterdir()} - {name, "out"}
        assert not outside, outside
        assert {p.name for p in (root / "out").iterdir()} <= {"model"}  # no temporary left
