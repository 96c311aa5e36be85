"""A pytest plugin that prints each collected test starting a real server, and its e2e mark.

`pytest --co -p helpers.server_audit` prints `SERVER <marked|unmarked> <node id>` lines. A test
starts a server when it, a fixture it uses or a function of its module calls `RunningServer(`
or `Servers(`. It reads the source, not the conftest's rule, so the two check each other.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

STARTS = re.compile(r"\b(?:RunningServer|Servers)\(")
# RunningServer's own tests run a fake server script in place of `modelhost serve`
FAKE_SERVERS = ("tests/test_testing.py::",)


def pytest_collection_finish(session: pytest.Session) -> None:
    for marked, nodeid in servers(session.items):
        print(f"SERVER {marked} {nodeid}")


def servers(items: list[pytest.Item]) -> list[tuple[str, str]]:
    """`marked` or `unmarked`, and the node id, of each item that starts a real server."""
    found = []
    for item in items:
        if item.nodeid.startswith(FAKE_SERVERS) or not any(map(_starts, _code_of(item))):
            continue
        found.append(("marked" if item.get_closest_marker("e2e") else "unmarked", item.nodeid))
    return found


def _code_of(item: pytest.Item) -> Iterator[Callable[..., Any]]:
    """The test function, the functions of its module it names, and its fixtures' functions."""
    test = getattr(item, "obj", None)
    if test is None:
        return
    yield test
    module = inspect.getmodule(test)
    for name in test.__code__.co_names:
        helper = getattr(module, name, None)
        if inspect.isfunction(helper) and inspect.getmodule(helper) is module:
            yield helper
    for definitions in item._fixtureinfo.name2fixturedefs.values():  # type: ignore[attr-defined]
        yield from (definition.func for definition in definitions)


@functools.cache  # a fixture serves hundreds of tests: its source is read once
def _starts(code: Callable[..., Any]) -> bool:
    try:
        return STARTS.search(inspect.getsource(code)) is not None
    except (OSError, TypeError):
        return False
