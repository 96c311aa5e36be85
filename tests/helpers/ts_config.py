"""Servers started as TorchServe starts, from a config.properties, on a store holding noop.mar
and noop_2.mar: two versions of one model, as TorchServe's examples ship them."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from helpers.serving import Servers
from modelhost import testing


def noop_versions(folders: pytest.TempPathFactory, root: Path) -> Path:
    """noop.mar (1.0) and noop_2.mar (2.0) in `root`; the folder of their handler."""
    source = testing.mms_handler_folder(folders.mktemp("noop-src") / "noop")
    testing.mar_of(source, root / "noop.mar")
    second = testing.mar_of(source, folders.mktemp("noop-v2") / "noop.mar", version="2.0")
    shutil.copy(second, root / "noop_2.mar")
    return source


def started_from_properties(
    serve: Servers, work: Path, properties: str, workers: int
) -> testing.RunningServer:
    """modelhost reading `properties` as TorchServe's config.properties (TS_CONFIG_FILE)."""
    path = work / "config.properties"
    path.write_text(properties)
    args = ["--cache-dir", str(work / "cache"), "--workers", str(workers)]
    environ = {**os.environ, "TS_CONFIG_FILE": str(path)}
    return serve.enter_context(
        testing.RunningServer([*args, "--memory-budget", "2GiB"], work, env=environ)
    )
