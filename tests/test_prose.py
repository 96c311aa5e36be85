"""The package's docstrings and comments stay as short as the most documented anchors'."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from prose_density import of_source, of_tree  # noqa: E402

# httpx 0.28.1 by scripts/prose_density.py: 1.41 (anyio 1.42, uvicorn 0.63, starlette 0.57)
MOST_DOCUMENTED_ANCHOR = 1.41


def test_prose_per_line_of_code_is_at_most_the_anchors() -> None:
    prose = of_tree(ROOT / "modelhost")
    assert prose.density <= MOST_DOCUMENTED_ANCHOR, (
        f"{prose.density:.2f} words of docstring and comment per line of code; shorten them "
        "(STYLE.md, 'Prose'): python scripts/prose_density.py modelhost/<dir> finds where"
    )


def test_the_count_separates_prose_from_code() -> None:
    source = '"""One two three."""\n\n# four five\nx = 1  # six\n\n\ndef f():\n    """Seven."""\n'
    source += "    return 2\n"
    prose = of_source(source)
    assert (prose.words, prose.code_lines) == (7, 3)
