"""What tests in every folder share."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator

import pytest
from helpers.serving import Servers


@pytest.fixture(scope="session")
def torch_installed() -> None:
    """Skip where torch is absent; fail under CI's REQUIRE_TEST_TOOLS=1, whose `make test`
    installs the CPU build, so a missing install step cannot pass as a skip."""
    if importlib.util.find_spec("torch") is not None:
        return
    message = "torch is not installed; `make test` installs the CPU build (torch==2.13.0)"
    if os.environ.get("REQUIRE_TEST_TOOLS"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """Starts servers for this module (`serve(store, workers=2)`); stops them when it is done."""
    with Servers(tmp_path_factory) as servers:
        yield servers
