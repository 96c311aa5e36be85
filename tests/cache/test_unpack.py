from __future__ import annotations

import gzip
import io
import stat
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from modelhost.cache.unpack import is_archive, unpack_archive
from modelhost.errors import ModelLoadError, UnsafeArtifact

MiB = 1 << 20
FILES = {"model/model.joblib": b"weights", "model/code/inference.py": b"def model_fn(d): ..."}


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "tenant-1" / "model"


def tar_member(tar: tarfile.TarFile, name: str, data: bytes = b"", **fields: object) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if data else None)


def make_tar(path: Path, members: dict[str, bytes], mode: str = "w:gz") -> Path:
    with tarfile.open(path, mode) as tar:
        tar_member(tar, "./", type=tarfile.DIRTYPE)
        for name, data in members.items():
            tar_member(tar, name, data)
    return path


def make_zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


Maker = Callable[[Path, dict[str, bytes]], Path]
MAKERS = [("m.tar.gz", make_tar), ("m.zip", make_zip)]


def unpack(archive: Path, dest: Path, max_bytes: int = MiB, max_files: int = 100) -> Path:
    return unpack_archive(archive, dest, max_bytes=max_bytes, max_files=max_files)


def assert_left_nothing(dest: Path) -> None:
    assert not dest.exists()
    assert list(dest.parent.iterdir()) == []  # no .tmp-* folder either


def read_tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", ["model.tar.gz", "model.tgz", "model.tar"])
def test_tar_unpacks(tmp_path: Path, dest: Path, name: str) -> None:
    archive = make_tar(tmp_path / name, FILES, "w:gz" if "gz" in name else "w")
    assert unpack(archive, dest) == dest
    assert read_tree(dest) == FILES
    assert [p.name for p in dest.parent.iterdir()] == ["model"]


@pytest.mark.parametrize("name", ["model.zip", "model.mar"])
def test_zip_unpacks(tmp_path: Path, dest: Path, name: str) -> None:
    assert read_tree(unpack(make_zip(tmp_path / name, FILES), dest)) == FILES


def test_format_is_found_by_magic_bytes(tmp_path: Path, dest: Path) -> None:
    archive = make_zip(tmp_path / "artifact", FILES)
    assert is_archive(archive)
    assert read_tree(unpack(archive, dest)) == FILES


def test_is_archive(tmp_path: Path) -> None:
    assert is_archive(make_tar(tmp_path / "a-tar-without-suffix", FILES))
    assert is_archive(tmp_path / "remote.tar.gz")  # by name alone, before it is downloaded
    gzipped_joblib = tmp_path / "model.joblib"
    gzipped_joblib.write_bytes(gzip.compress(b"pickle"))
    assert not is_archive(gzipped_joblib)
    plain = tmp_path / "model.bin"
    plain.write_bytes(b"\x00" * 600)
    assert not is_archive(plain)


def test_existing_destination_wins_the_race(tmp_path: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    (dest / "theirs").write_bytes(b"x")
    assert unpack(make_tar(tmp_path / "m.tar.gz", FILES), dest) == dest
    assert read_tree(dest) == {"theirs": b"x"}
    assert [p.name for p in dest.parent.iterdir()] == ["model"]


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        ("../evil", "climbs out"),
        ("model/../../evil", "climbs out"),
        ("/etc/evil", "has an absolute"),
    ],
)
def test_tar_paths_that_escape(tmp_path: Path, dest: Path, name: str, rule: str) -> None:
    archive = make_tar(tmp_path / "m.tar.gz", {"ok": b"1", name: b"evil"})
    with pytest.raises(UnsafeArtifact, match=f"member '{name}' {rule}"):
        unpack(archive, dest)
    assert_left_nothing(dest)


@pytest.mark.parametrize(
    ("name", "rule"), [("../evil", "climbs out"), ("/abs", "absolute"), ("C:\\evil", "absolute")]
)
def test_zip_paths_that_escape(tmp_path: Path, dest: Path, name: str, rule: str) -> None:
    archive = tmp_path / "m.zip"
    with zipfile.ZipFile(archive, "w") as zip_file:
        zip_file.writestr("ok", b"1")
        zip_file.writestr(zipfile.ZipInfo(name), b"evil")  # ZipInfo keeps the name as given
    with pytest.raises(UnsafeArtifact, match=rule):
        unpack(archive, dest)
    assert_left_nothing(dest)


@pytest.mark.parametrize(
    ("fields", "rule"),
    [
        ({"type": tarfile.SYMTYPE, "linkname": "/etc/passwd"}, "symbolic link to '/etc/passwd'"),
        ({"type": tarfile.LNKTYPE, "linkname": "/etc/passwd"}, "hard link"),
        ({"type": tarfile.LNKTYPE, "linkname": "model/model.joblib"}, "hard link"),
        ({"type": tarfile.FIFOTYPE}, "device or FIFO"),
        ({"type": tarfile.CHRTYPE}, "device or FIFO"),
    ],
)
def test_tar_links_and_devices(
    tmp_path: Path, dest: Path, fields: dict[str, object], rule: str
) -> None:
    archive = make_tar(tmp_path / "m.tar.gz", FILES)
    with tarfile.open(archive, "w:gz") as tar:
        tar_member(tar, "model/model.joblib", b"weights")
        tar_member(tar, "model/link", **fields)
    with pytest.raises(UnsafeArtifact, match=f"member 'model/link' is a {rule}"):
        unpack(archive, dest)
    assert_left_nothing(dest)


def test_zip_symlink(tmp_path: Path, dest: Path) -> None:
    archive = tmp_path / "m.zip"
    link = zipfile.ZipInfo("passwd")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    with zipfile.ZipFile(archive, "w") as zip_file:
        zip_file.writestr(link, "/etc/passwd")
    with pytest.raises(UnsafeArtifact, match="member 'passwd' is a symbolic link"):
        unpack(archive, dest)
    assert_left_nothing(dest)


@pytest.mark.parametrize(("name", "maker"), MAKERS)
def test_too_many_files(tmp_path: Path, dest: Path, name: str, maker: Maker) -> None:
    archive = maker(tmp_path / name, {f"f{index}": b"x" for index in range(11)})
    with pytest.raises(UnsafeArtifact, match="past the limit of 10 members"):
        unpack(archive, dest, max_files=10)
    assert_left_nothing(dest)


@pytest.mark.parametrize(("name", "maker"), MAKERS)
def test_bomb(tmp_path: Path, dest: Path, name: str, maker: Maker) -> None:
    archive = maker(tmp_path / name, {"small": b"1" * 1000, "bomb": bytes(5 * MiB)})
    assert archive.stat().st_size < 64 * 1024  # 5 MiB of zeros compresses to a few KiB
    with pytest.raises(UnsafeArtifact, match=f"member 'bomb' .* past the limit of {MiB} bytes"):
        unpack(archive, dest, max_bytes=MiB)
    assert_left_nothing(dest)


def test_many_small_members_add_up(tmp_path: Path, dest: Path) -> None:
    members = {f"part{index}": bytes(300 * 1024) for index in range(4)}
    with pytest.raises(UnsafeArtifact, match="member 'part3'"):
        unpack(make_tar(tmp_path / "m.tar.gz", members), dest, max_bytes=MiB)
    assert_left_nothing(dest)


def test_truncated_archive_is_a_load_error(tmp_path: Path, dest: Path) -> None:
    archive = make_tar(tmp_path / "m.tar.gz", {"big": bytes(range(256)) * 4096})
    archive.write_bytes(archive.read_bytes()[:2000])
    with pytest.raises(ModelLoadError, match="corrupt, truncated or malformed") as caught:
        unpack(archive, dest)
    assert type(caught.value) is ModelLoadError
    assert_left_nothing(dest)


def test_not_an_archive(tmp_path: Path, dest: Path) -> None:
    path = tmp_path / "model.onnx"
    path.write_bytes(b"onnx")
    with pytest.raises(ModelLoadError, match="not a tar, tar.gz or zip archive"):
        unpack(path, dest)


class NoRoom(Exception):
    pass


@pytest.mark.parametrize(("name", "maker"), MAKERS)
def test_room_is_asked_for_a_members_declared_size_before_it_is_written(
    tmp_path: Path, dest: Path, name: str, maker: Maker
) -> None:
    """The disk budget hears what a member will take, not what its first chunk did, so a 507
    says what the archive needs (not the bytes written when room ran out)."""
    archive = maker(tmp_path / name, {"weights": bytes(3 * MiB)})
    heard: list[int] = []

    def no_room(total: int) -> None:
        heard.append(total)
        raise NoRoom

    with pytest.raises(NoRoom):
        unpack_archive(archive, dest, max_bytes=4 * MiB, max_files=10, on_bytes=no_room)
    assert heard == [3 * MiB]
    assert_left_nothing(dest)
