"""docs/configuration.md's settings table names every setting, and only settings, with the
default the code has."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from modelhost.config.settings import setting_fields, setting_names

DOC = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"
ROW = re.compile(r"^\| (`\w+`(?:, `\w+`)*) \| ([^|]+) \|")
EMPTY_WORDS = ("none", "empty", "one per usable core", "the store", "the hostname")


def documented() -> dict[str, str]:
    """Each setting of the table and its default cell, a cell shared by two keys split."""
    defaults = {}
    for line in DOC.read_text().split("## Configuration", 1)[1].splitlines():
        if found := ROW.match(line):
            keys = re.findall(r"`(\w+)`", found[1])
            cells = re.split(r", (?=`|none|empty)", found[2].strip())
            if len(cells) != len(keys):  # one cell for every key of the row
                cells = cells[:1] * len(keys)
            defaults |= dict(zip(keys, cells, strict=True))
    return defaults


def shown(default: Any) -> str:
    """A code default as the table writes it."""
    if isinstance(default, bool):
        return str(default).lower()
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    return ",".join(default) if isinstance(default, tuple) else str(default)


def test_every_setting_has_a_row_and_every_row_is_a_setting() -> None:
    rows = documented()
    assert sorted(set(setting_names()) - set(rows)) == []
    assert sorted(set(rows) - set(setting_names())) == []


@pytest.mark.parametrize("field", setting_fields(), ids=lambda f: f.name)
def test_the_documented_default_is_the_codes(field: dataclasses.Field[Any]) -> None:
    cell = documented().get(field.name)
    if cell is None:
        pytest.fail(f"{field.name} has no row in docs/configuration.md")
    quoted = re.match(r"`([^`]+)`", cell)
    if quoted and quoted[1] not in setting_names():
        assert quoted[1] == shown(field.default)
    else:  # "none", or another setting's value: nothing of its own
        assert cell.startswith(EMPTY_WORDS) or quoted, cell
        assert not field.default


def test_the_sagemaker_guide_names_the_default_eviction_policy_outside_the_contract() -> None:
    """Outside the contract models are evicted by the policy, whose default is not LRU."""
    guide = (DOC.parent / "migrating-sagemaker.md").read_text()
    outside = guide.split("## 8. Outside SageMaker", 1)[1]
    default = next(f.default for f in setting_fields() if f.name == "eviction_policy")
    assert f"`{default}`" in outside and "`eviction_policy`" in outside
