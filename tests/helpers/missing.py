"""What a test does when a tool or package it needs is absent."""

from __future__ import annotations

import importlib.util
import os
from typing import NoReturn

import pytest


def missing(message: str) -> NoReturn:
    """Skip; fail under CI's REQUIRE_TEST_TOOLS=1, whose `make test` installs every tool, so a
    missing install step cannot pass as a skip."""
    if os.environ.get("REQUIRE_TEST_TOOLS"):
        pytest.fail(message)
    pytest.skip(message)


def require_module(module: str) -> None:
    """`missing` unless `module` is installed (the dev set has it)."""
    if importlib.util.find_spec(module) is None:
        missing(f"{module} is not installed: pip install -e '.[dev]'")
