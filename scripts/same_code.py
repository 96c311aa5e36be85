"""Whether the Python files differ from a revision only in docstrings and comments.

python scripts/same_code.py HEAD~5 modelhost
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from prose_density import docstrings


def without_prose(source: str) -> str:
    tree = ast.parse(source)
    if not tree.body:
        return ""
    for node, _, _ in list(docstrings(tree)):
        body = node.body  # type: ignore[attr-defined]
        node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return ast.dump(tree)


def git(*args: str) -> str:
    """Git's output; empty where it fails (a file the revision does not have)."""
    return subprocess.run(["git", *args], capture_output=True, text=True).stdout


def changed(revision: str, root: str) -> list[str]:
    names = git("diff", "--name-only", revision, "--", root).split()
    return [
        name
        for name in names
        if name.endswith(".py")
        and Path(name).exists()
        and without_prose(git("show", f"{revision}:{name}"))
        != without_prose(Path(name).read_text())
    ]


if __name__ == "__main__":
    differ = changed(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "modelhost")
    print("\n".join(differ) or "only docstrings and comments differ")
    sys.exit(1 if differ else 0)
