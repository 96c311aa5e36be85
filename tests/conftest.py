"""What tests in every folder share."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.failure_logs import pytest_runtest_makereport  # noqa: F401 (a hook)
from helpers.missing import missing
from helpers.serving import Servers

from modelhost.config import THREAD_VARIABLES

E2E_FOLDER = Path(__file__).parent / "e2e"
# `serve` starts servers through helpers.serving; `server` is each folder's running server
SERVER_FIXTURES = frozenset({"serve", "server"})
# the environment variables a server started later would read, by name or prefix (libraries set
# others of their own as they first import or compile, once a process)
SERVERS_VARIABLES = ("MODELHOST_", "SAGEMAKER_", "SM_", "TS_", "MMS_", "HF_", *THREAD_VARIABLES)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark e2e every test that starts a real server, so `pytest -m "not e2e"` is the fast loop.

    A `pytestmark` in a conftest.py marks nothing. Tests under tests/e2e/, in a `*_e2e.py` module or
    using a server fixture are marked here; a mixed module marks its own server tests.
    """
    for item in items:
        if _starts_a_server(item):
            item.add_marker(pytest.mark.e2e)


def _starts_a_server(item: pytest.Item) -> bool:
    in_e2e_module = item.path.is_relative_to(E2E_FOLDER) or item.path.stem.endswith("_e2e")
    return in_e2e_module or not SERVER_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))


@pytest.fixture(autouse=True)
def environment_kept() -> Iterator[None]:
    """Fail a test that leaves a variable servers read changed: a later test in the same process,
    and every server it starts, would inherit it and fail or pass by the order modules ran in."""
    before = dict(os.environ)
    yield
    changed = {name for name, _ in set(before.items()) ^ set(os.environ.items())}
    names = {name for name in changed if name.startswith(SERVERS_VARIABLES)}
    if names:
        pytest.fail(
            f"the test left os.environ changed ({', '.join(sorted(names))}): use monkeypatch"
        )


@pytest.fixture(scope="session")
def torch_installed() -> None:
    """Skip where torch is absent; fail under CI's REQUIRE_TEST_TOOLS=1, whose `make test`
    installs the CPU build, so a missing install step cannot pass as a skip."""
    if importlib.util.find_spec("torch") is None:
        missing("torch is not installed; `make test` installs the CPU build (torch==2.13.0)")


@pytest.fixture(scope="session")
def vision_python() -> str:
    """The Python of `make test-vision`'s venv (torch and torchvision of one build, TorchServe);
    skips where it is absent, fails under CI's REQUIRE_TEST_TOOLS=1 as `torch_installed` does."""
    venv = Path(os.environ.get("VISION_VENV", Path(__file__).parents[1] / ".venv-vision"))
    if not (venv / ".installed").exists():
        missing(f"{venv} is not installed; `make test-vision` makes it")
    return str(venv / "bin" / "python")


@pytest.fixture(scope="module")
def serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    """Starts servers for this module (`serve(store, workers=2)`); stops them when it is done."""
    with Servers(tmp_path_factory) as servers:
        yield servers
