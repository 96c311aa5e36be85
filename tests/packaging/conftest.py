"""The wheel, built once per session, and one fresh environment holding it without any extra."""

from __future__ import annotations

from pathlib import Path

import pytest
from fresh_env import build_wheel, fresh_env


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("dist"))


@pytest.fixture(scope="session")
def base_env(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Path:
    """The bin folder of a venv with the wheel and its base dependencies: no extra."""
    return fresh_env(tmp_path_factory.mktemp("base-env") / "venv", wheel)
