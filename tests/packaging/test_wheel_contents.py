"""The wheel users install holds every module and package-data file of the checkout, and nothing
of the tests."""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

from fresh_env import ROOT, wheel_names


def package_files() -> set[str]:
    """The files under modelhost/ that git tracks (the checkout's own, not caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "modelhost"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return set(listed.stdout.split())


def test_the_wheel_holds_every_module_and_data_file(wheel: Path) -> None:
    files = package_files()
    assert "modelhost/observe/dashboard.html" in files  # the listing found the data files
    assert files - wheel_names(wheel) == set()


def test_the_wheel_holds_nothing_of_the_tests(wheel: Path) -> None:
    assert not [name for name in wheel_names(wheel) if name.startswith("tests/")]
    assert not [name for name in wheel_names(wheel) if "/tests/" in name or "conftest" in name]


def test_the_wheel_declares_the_command_and_the_extras(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        [entry_points] = [n for n in archive.namelist() if n.endswith("entry_points.txt")]
        [meta] = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        scripts = archive.read(entry_points).decode()
        extras = {
            line.split(":", 1)[1].strip()
            for line in archive.read(meta).decode().splitlines()
            if line.startswith("Provides-Extra:")
        }
    assert "modelhost = modelhost.cli.main:main" in scripts
    assert {"toolkit", "xgboost", "lightgbm", "onnx", "torch", "all"} <= extras
