"""Words of docstring and comment per line of code, for a package or a file.

    python scripts/prose_density.py modelhost
    python scripts/prose_density.py .venv/lib/python3.11/site-packages/httpx

The same count for every tree: a docstring is the first string of a module, class or function;
a line of code holds any token that is not a comment or a docstring.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


@dataclass
class Prose:
    words: int = 0
    code_lines: int = 0

    @property
    def density(self) -> float:
        return self.words / max(1, self.code_lines)

    def add(self, other: Prose) -> None:
        self.words += other.words
        self.code_lines += other.code_lines


def docstrings(tree: ast.Module) -> Iterator[tuple[ast.AST, ast.Expr, str]]:
    """Each module, class or function with its docstring's statement and text."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                yield node, first, first.value.value


def docstring_lines(tree: ast.Module) -> tuple[int, set[int]]:
    """The words of every docstring and the lines they cover."""
    words, lines = 0, set()
    for _, statement, text in docstrings(tree):
        words += len(text.split())
        lines.update(range(statement.lineno, (statement.end_lineno or statement.lineno) + 1))
    return words, lines


def of_source(source: str) -> Prose:
    words, docstrings = docstring_lines(ast.parse(source))
    code: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            words += len(token.string.lstrip("#").split())
        elif token.type not in SKIP and token.start[0] not in docstrings:
            code.update(range(token.start[0], token.end[0] + 1))
    return Prose(words, len(code))


def of_tree(root: Path) -> Prose:
    total = Prose()
    for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
        total.add(of_source(path.read_text(encoding="utf-8")))
    return total


def main(roots: list[str]) -> None:
    for root in roots:
        prose = of_tree(Path(root))
        print(
            f"{prose.density:.2f} words/line  {prose.words} words  {prose.code_lines} lines  {root}"
        )


if __name__ == "__main__":
    main(sys.argv[1:] or ["modelhost"])
