"""Archives of model folders, as stores hold them."""

from __future__ import annotations

import tarfile
import zipfile
from pathlib import Path

from modelhost.testing.models import parent_made


def tar_gz_of(folder: Path, archive_path: Path) -> Path:
    """A .tar.gz of the folder's contents, as SageMaker's model.tar.gz."""
    archive_path = parent_made(archive_path)
    with tarfile.open(archive_path, "w:gz") as tar:
        for item in sorted(Path(folder).iterdir()):
            tar.add(item, arcname=item.name)
    return archive_path


def zip_of(folder: Path, archive_path: Path) -> Path:
    folder, archive_path = Path(folder), parent_made(archive_path)
    with zipfile.ZipFile(archive_path, "w", zipfile.ZIP_DEFLATED) as archive:
        for item in sorted(folder.rglob("*")):
            archive.write(item, item.relative_to(folder).as_posix())
    return archive_path
