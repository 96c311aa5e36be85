"""A wheel built from this checkout, and fresh virtual environments that hold it with only the
base dependencies: no extra, so what a user gets from `pip install modelhost`.

The base dependencies are linked from the environment running the tests (resolved from the
installed modelhost's metadata, markers and all), not downloaded again: a fresh environment is
ready in seconds and holds exactly the distributions the base install pulls in.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


def build_wheel(out_dir: Path) -> Path:
    """`python -m build` of the checkout (the sdist, then the wheel from the sdist); the wheel."""
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out_dir), str(ROOT)],
        check=True,
        capture_output=True,
    )
    [wheel] = out_dir.glob("modelhost-*.whl")
    return wheel


def wheel_names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def base_distributions() -> list[metadata.Distribution]:
    """The distributions `pip install modelhost` installs besides modelhost, with no extra."""
    found: dict[str, metadata.Distribution] = {}
    wanted = ["modelhost"]
    while wanted:
        name = canonicalize_name(wanted.pop())
        if name in found:
            continue
        # from site-packages only: an imported package may have put its vendored copies
        # (ray's thirdparty_files holds psutil) ahead of it on sys.path
        site = [sysconfig.get_path("purelib")]
        found[name] = dist = next(iter(metadata.distributions(name=name, path=site)))
        for text in dist.requires or []:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                wanted.append(requirement.name)
    del found["modelhost"]
    return list(found.values())


def fresh_env(path: Path, wheel: Path) -> Path:
    """A venv at `path` with the wheel and the base dependencies only; its bin folder."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    for dist in base_distributions():
        _link(dist, site)
    install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    subprocess.run([*install, "--quiet", "--no-deps", "--no-index", str(wheel)], check=True)
    return path / "bin"


def _link(dist: metadata.Distribution, site: Path) -> None:
    """Link the top-level files and folders `dist` installed into `site`."""
    here = Path(sysconfig.get_path("purelib"))
    for top in {Path(str(f)).parts[0] for f in dist.files or []}:
        source = Path(str(dist.locate_file(top)))
        if top in ("..", "__pycache__") or source.parent != here or not source.exists():
            continue
        target = site / top
        if not target.exists():
            target.symlink_to(source)
