"""The toolkit's terminal tables never cut a figure: piped to a file at its full width, and in
a narrow terminal folded rather than ended with an ellipsis."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from modelhost.toolkit.report.terminal import console_for, table

HEADER = ["workers", "concurrency", "throughput_rps", "p50_ms", "p95_ms", "p99_ms", "errors"]
HEADER += ["server_cpu_s", "server_peak_pss_mib", "cost_per_million", "monthly requests"]
ROW = ["2", 4, 1149.5, 3.243, 5.7656, 8.548, 0, 1.52, 178.916, 0.02779, "1,000,000,000"]


def test_a_table_piped_to_a_file_keeps_every_figure(monkeypatch: pytest.MonkeyPatch) -> None:
    """tune's table went to a log 80 columns wide: "wor…", "1,1…", "0.02…"."""
    monkeypatch.delenv("COLUMNS", raising=False)
    out = io.StringIO()
    console_for(out).print(table("tune (grid)", HEADER, [ROW]))
    text = out.getvalue()
    assert "…" not in text
    for shown in [*HEADER, "1,149.5", "0.0278", "178.9", "1,000,000,000"]:
        assert shown in text


def test_a_narrow_terminal_folds_figures_instead_of_cutting_them() -> None:
    out = io.StringIO()
    Console(file=out, width=80, force_terminal=True).print(table("tune", HEADER, [ROW]))
    assert "…" not in out.getvalue()
