"""A self-contained HTML page: a title, figures as tables, inline SVG charts; no script."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 90rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; margin: .5rem 0; }
th, td { border-bottom: 1px solid #ddd; padding: .25rem .7rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
tr.best td { background: #e8f4e8; font-weight: 600; }
.warning { background: #fff3cd; padding: .5rem .8rem; border-left: 4px solid #e0a800; }
.note { color: #666; }
.lines { white-space: pre-line; }
svg { max-width: 100%; height: auto; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(32rem, 1fr)); gap: 1rem; }
"""


def cell(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "–"
        return f"{value:,.1f}" if abs(value) >= 10 else f"{value:.3g}"
    return html.escape(str(value))


def table(
    header: Sequence[str], rows: Sequence[Sequence[Any]], highlight: int | None = None
) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        mark = ' class="best"' if index == highlight else ""
        body.append(f"<tr{mark}>" + "".join(f"<td>{cell(v)}</td>" for v in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def warnings(messages: Sequence[str]) -> str:
    return "".join(f'<p class="warning">{html.escape(m)}</p>' for m in messages)


def paragraph(text: str, css_class: str = "") -> str:
    attribute = f' class="{css_class}"' if css_class else ""
    return f"<p{attribute}>{html.escape(text)}</p>"


def grid(charts: Sequence[str]) -> str:
    """Charts side by side, as many to a row as fit."""
    return '<div class="grid">' + "".join(f"<figure>{c}</figure>" for c in charts) + "</div>"


def page(title: str, sections: Sequence[tuple[str, str]]) -> str:
    """`sections` are (heading, trusted HTML) pairs, in order."""
    parts = [f"<h2>{html.escape(heading)}</h2>\n{body}" for heading, body in sections]
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>\n" + "\n".join(parts) + "\n</body></html>\n"
    )
